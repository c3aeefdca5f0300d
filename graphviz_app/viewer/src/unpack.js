// @ts-check
// Packed columns (graphviz_app/viewer/packing.py) read back: a long column of the payload arrives as one
// value, a range, bit planes or little-endian numbers in base64, and becomes a typed array (no parse per entry);
// a column with nulls a plain array; a column of lists a Rows.
/** @typedef {import("./types.js").Column} Column */

const KEY = "$packed";
/** @type {Record<string, (new (buffer: ArrayBuffer) => Int8Array | Int16Array | Int32Array | Float32Array | Float64Array)>} */
const TYPES = { i8: Int8Array, i16: Int16Array, i32: Int32Array, f32: Float32Array, f64: Float64Array };
const WIDTH = { i8: 1, i16: 2, i32: 4, f32: 4, f64: 8 };

/** A list per entry, read from their lengths and their numbers one after another. */
export class Rows {
  /**
   * @param {ArrayLike<number>} lengths  -1: the entry is `none`
   * @param {ArrayLike<number>} flat
   * @param {null | number} none
   */
  constructor(lengths, flat, none) {
    this.length = lengths.length;
    this.lengths = lengths;
    this.flat = flat;
    this.none = none;
    /** @type {Float64Array | null} where each entry starts in `flat` (made when first read) */
    this.starts = null;
  }
  /** @param {number} i @returns {ArrayLike<number> | null | number} */
  get(i) {
    const n = this.lengths[i];
    if (n === undefined || n < 0) return this.none;
    if (!this.starts) {
      this.starts = new Float64Array(this.length);
      let at = 0;
      for (let k = 0; k < this.length; k++) {
        this.starts[k] = at;
        if (this.lengths[k] > 0) at += this.lengths[k];
      }
    }
    const a = this.starts[i];
    return "subarray" in this.flat ? /** @type {Float64Array} */ (this.flat).subarray(a, a + n) : Array.prototype.slice.call(this.flat, a, a + n);
  }
}

/**
 * Entry `i` of a column that holds a list per entry (a plain array of lists, or Rows).
 * @param {import("./types.js").RowColumn<any, any> | undefined} column @param {number} i @returns {any}
 */
export function row(column, i) {
  if (!column) return undefined;
  return column instanceof Rows ? column.get(i) : column[i];
}

/** Is `x` a column (a plain array or a typed array)? @param {unknown} x @returns {x is Column} */
export function isColumn(x) {
  return Array.isArray(x) || (ArrayBuffer.isView(x) && !(x instanceof DataView));
}

/**
 * `value` with every packed column in it read back, in place: objects and arrays of objects are walked,
 * columns of plain values are not.
 * @param {any} value
 * @returns {any}
 */
export function unpackAll(value) {
  if (!value || typeof value !== "object") return value;
  if (Array.isArray(value)) {
    if (value.length && value[0] && typeof value[0] === "object" && !Array.isArray(value[0])) {
      for (let i = 0; i < value.length; i++) value[i] = unpackAll(value[i]);
    }
    return value;
  }
  if (KEY in value) return unpackColumn(value);
  for (const key of Object.keys(value)) value[key] = unpackAll(value[key]);
  return value;
}

/**
 * One packed column read back.
 * @param {any} packed
 * @returns {Column | Rows}
 */
export function unpackColumn(packed) {
  if (!packed || typeof packed !== "object" || !(KEY in packed)) return packed;
  const n = packed.n;
  if (!Number.isInteger(n) || n < 0) throw new Error("the graph data is damaged (a packed column without its length): save the graph again");
  switch (packed[KEY]) {
    case "const": {
      const v = packed.value;
      if (v === null) return new Array(n).fill(null);
      return filled(n, v);
    }
    case "range": {
      const out = wide(packed.start, packed.start + (n - 1) * packed.step, n);
      for (let i = 0; i < n; i++) out[i] = packed.start + i * packed.step;
      return out;
    }
    case "int": {
      const stored = packed.type === "bits" ? bits(packed.width, packed.min, packed.data, n) : numbers(packed.type, packed.data, n);
      if (packed.start === undefined) return stored;
      const out = new Int32Array(n);
      let at = packed.start;
      for (let i = 0; i < n; i++) { at += stored[i]; out[i] = at; }
      return out;
    }
    case "num":
      return numbers(packed.type, packed.data, n);
    case "nullable":
      return nullable(n, packed.none, unpackColumn(packed.present), unpackColumn(packed.values));
    case "rows": {
      const lengths = unpackColumn(packed.lengths), flat = unpackColumn(packed.flat);
      if (lengths instanceof Rows || flat instanceof Rows || lengths.length !== n) throw damaged();
      return new Rows(lengths, flat, null);
    }
    default:
      throw new Error(`the graph data holds a column packed as ${JSON.stringify(packed[KEY])}, which this viewer does not read: open it with the graphviz-app that saved it`);
  }
}

/**
 * The entries of `present` that are 1 come from `values` in turn, the others are `none`.
 * @param {number} n @param {null | number} none @param {Column | Rows} present @param {Column | Rows} values
 * @returns {Column | Rows}
 */
function nullable(n, none, present, values) {
  if (present instanceof Rows || present.length !== n) throw damaged();
  if (values instanceof Rows) {
    const lengths = new Int32Array(n).fill(-1);
    for (let i = 0, k = 0; i < n; i++) if (present[i]) lengths[i] = values.lengths[k++];
    return new Rows(lengths, values.flat, none);
  }
  const out = none === null ? new Array(n) : new Int32Array(n);
  for (let i = 0, k = 0; i < n; i++) out[i] = present[i] ? values[k++] : none;
  return out;
}

/** @param {number} n @param {number} v @returns {Int32Array | Float64Array} */
function filled(n, v) {
  return wide(v, v, n).fill(v);
}

/** @param {number} lo @param {number} hi @param {number} n @returns {Int32Array | Float64Array} */
function wide(lo, hi, n) {
  const whole = Number.isInteger(lo) && Number.isInteger(hi);
  return whole && Math.min(lo, hi) >= -2147483648 && Math.max(lo, hi) <= 2147483647 ? new Int32Array(n) : new Float64Array(n);
}

/**
 * @param {string} type @param {string} data @param {number} n
 * @returns {Int8Array | Int16Array | Int32Array | Float32Array | Float64Array}
 */
function numbers(type, data, n) {
  const Type = TYPES[type];
  if (!Type || typeof data !== "string") throw damaged();
  const bytes = base64Bytes(data);
  if (bytes.length !== n * WIDTH[/** @type {keyof typeof WIDTH} */ (type)]) throw damaged();
  return new Type(bytes.buffer);
}

/**
 * Numbers `lo` to `lo + 2**width - 1` from `width` bit planes (entry i's bit k: bit i % 8 of byte i / 8 of plane k).
 * @param {number} width @param {number} lo @param {string} data @param {number} n @returns {Int32Array}
 */
function bits(width, lo, data, n) {
  if (![1, 2, 4].includes(width) || !Number.isInteger(lo) || typeof data !== "string") throw damaged();
  const bytes = base64Bytes(data), size = (n + 7) >> 3;
  if (bytes.length !== width * size) throw damaged();
  const out = new Int32Array(n).fill(lo);
  for (let k = 0; k < width; k++) {
    const plane = bytes.subarray(k * size, (k + 1) * size);
    for (let i = 0; i < n; i++) out[i] += ((plane[i >> 3] >> (i & 7)) & 1) << k;
  }
  return out;
}

function damaged() {
  return new Error("the graph data is damaged (a packed column does not hold its entries): save the graph again");
}

/**
 * The bytes `b64` spells, in a buffer of their own. `Uint8Array.fromBase64` where the browser has it (a
 * 24 MB payload: 14-29 ms against 48-94 ms for atob and a copy loop, in Chromium), else atob.
 * @param {string} b64
 * @returns {Uint8Array<ArrayBuffer>}
 */
export function base64Bytes(b64) {
  const fromBase64 = /** @type {{fromBase64?: (text: string) => Uint8Array<ArrayBuffer>}} */ (/** @type {unknown} */ (Uint8Array)).fromBase64;
  try {
    if (typeof fromBase64 === "function") return fromBase64(b64);
    const binary = atob(b64);
    const bytes = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
    return bytes;
  } catch {
    throw new Error("the graph data is damaged (not base64): save the graph again");
  }
}
