// @ts-check
// Fills by an overlay's values on a log (or linear) scale, and the text colour readable on a fill.
// (Fills by node kind are the style sheet's, one set per theme: viewer.css.)
/** @typedef {import("./types.js").Overlay} Overlay */
const RAMP = ["#2c7bb6", "#abd9e9", "#ffffbf", "#fdae61", "#d7191c"];
export const NO_VALUE = "#f2f2f2";
export const FLAG = "#ff4d4d";

/** "#rrggbb" a part t of the way to b. @param {string} a @param {string} b @param {number} t @returns {string} */
function mix(a, b, t) {
  const pa = [1, 3, 5].map((k) => parseInt(a.slice(k, k + 2), 16));
  const pb = [1, 3, 5].map((k) => parseInt(b.slice(k, k + 2), 16));
  return "#" + pa.map((v, k) => Math.round(v + (pb[k] - v) * t).toString(16).padStart(2, "0")).join("");
}

/** The colour at t (0: low, 1: high) of the blue-yellow-red ramp. @param {number} t @returns {string} */
export function ramp(t) {
  const x = Math.max(0, Math.min(1, t)) * (RAMP.length - 1);
  const k = Math.min(RAMP.length - 2, Math.floor(x));
  return mix(RAMP[k], RAMP[k + 1], x - k);
}

// A scale over an overlay's node and group values: value -> colour.
export class Scale {
  /** @param {Overlay} overlay */
  constructor(overlay) {
    this.overlay = overlay;
    this.log = overlay.scale === "log";
    let lo = Infinity, hi = -Infinity;
    for (const list of [overlay.node || [], overlay.group || []]) {
      for (const v of list) {
        if (v === null || v === undefined || !isFinite(v)) continue;
        const x = this.log ? (v > 0 ? Math.log10(v) : null) : v;
        if (x === null) continue;
        lo = Math.min(lo, x);
        hi = Math.max(hi, x);
      }
    }
    if (overlay.symmetric && isFinite(lo)) { hi = Math.max(Math.abs(lo), Math.abs(hi)); lo = -hi; }
    this.lo = lo; this.hi = hi;
    this.flags = new Set(overlay.flag || []);
    this.marks = new Set((overlay.mark || []).filter(Number.isInteger));  // ringed (see marks.js)
  }
  /** @param {number | null | undefined} v @returns {string} */
  colour(v) {
    if (v === null || v === undefined || !isFinite(v)) return NO_VALUE;
    if (this.log && v <= 0) return "#d0d0d0";
    const x = this.log ? Math.log10(v) : v;
    return ramp(this.hi > this.lo ? (x - this.lo) / (this.hi - this.lo) : 0.5);
  }
  /** @param {number} i @returns {string} */
  node(i) { return this.flags.has(i) ? FLAG : this.colour(this.overlay.node[i]); }
  /** @param {number} g @returns {string} */
  group(g) { return this.colour((this.overlay.group || [])[g]); }
  /** @returns {string} */
  legend() {
    if (!isFinite(this.lo)) return "no values";
    /** @param {number} x */
    const f = (x) => (this.log ? format(10 ** x, this.overlay.unit) : format(x, this.overlay.unit));
    return `${f(this.lo)} … ${f(this.hi)}`;
  }
}

/**
 * The relative luminance of "#rrggbb" (WCAG 2).
 * @param {string} hex
 * @returns {number}
 */
export function luminance(hex) {
  const [r, g, b] = [1, 3, 5].map((k) => {
    const c = parseInt(hex.slice(k, k + 2), 16) / 255;
    return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}

/**
 * The contrast ratio of two "#rrggbb" colours (WCAG 2: 1 to 21).
 * @param {string} a @param {string} b
 * @returns {number}
 */
export function contrast(a, b) {
  const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x);
  return (hi + 0.05) / (lo + 0.05);
}

/**
 * Black or white, whichever reads better on `fill` (at least 4.58:1 on any colour).
 * @param {string} fill  "#rrggbb"
 * @returns {string}
 */
export function textOn(fill) {
  return contrast(fill, "#000000") >= contrast(fill, "#ffffff") ? "#000000" : "#ffffff";
}

/**
 * A number in words: bytes as KiB/MiB/GiB, others to 4 digits. A value that is not a number (a saved
 * file's or an overlay's text, a flag) is shown as its text, never formatted as one.
 * @param {number | string | boolean | null | undefined} v @param {string} [unit] @returns {string}
 */
export function format(v, unit) {
  if (v === null || v === undefined) return "—";
  if (typeof v !== "number") return String(v);
  if (unit === "bytes") return v < 0 ? "−" + bytes(-v) : bytes(v);
  return Math.abs(v) >= 1e4 || (Math.abs(v) < 1e-3 && v !== 0) ? v.toExponential(2) : +v.toPrecision(4) + "";
}

/** @param {number} n @returns {string} */
export function bytes(n) {
  let size = n;
  for (const unit of ["B", "KiB", "MiB", "GiB"]) {
    // whole bytes: a legend's ends come back through log10 and 10 ** x (32.00000000000001)
    if (size < 1024 || unit === "GiB") return unit === "B" ? `${Math.round(n)} B` : `${size.toFixed(1)} ${unit}`;
    size /= 1024;
  }
  return `${n} B`;
}
