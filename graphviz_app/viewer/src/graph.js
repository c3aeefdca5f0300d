// @ts-check
// Read access to the compact (schema 3) graph: one array per field (a typed array, or Rows for a list per
// entry, where the column arrived packed), strings in one table.
import { row } from "./unpack.js";

/** @typedef {import("./types.js").CompactGraph} CompactGraph */
/** @typedef {import("./types.js").Stat} Stat */
/** @typedef {"data" | "saved" | "view"} EdgeKind */

/**
 * A tensor's fields, read from its columns.
 * @typedef {object} Tensor
 * @property {string | null} name
 * @property {ArrayLike<number>} shape
 * @property {string | null} dtype
 * @property {string | null} device
 * @property {number} numel
 * @property {number} bytes
 * @property {boolean} requiresGrad
 * @property {ArrayLike<number | string | boolean> | null} values
 * @property {string | null} storage
 * @property {boolean} freed
 * @property {number | null} storageBytes
 * @property {string | null} sharding  how a rank's DTensor is laid out (local shard of a global shape)
 */

/**
 * A gradient's statistics, non-finite ones as numbers again.
 * @typedef {object} Grad
 * @property {number} numel
 * @property {number} norm
 * @property {number} maxAbs
 * @property {number} meanAbs
 * @property {number} nan
 * @property {number} inf
 * @property {number} zeroFraction
 * @property {ArrayLike<number | string> | null} values
 */

/** @typedef {{type: string, params: number, bytes: number}} ModuleInfo */

/** @type {EdgeKind[]} */
const EDGE_KINDS = ["data", "saved", "view"];
/** @type {Map<Stat, number>} */
const NONFINITE = new Map([["nan", NaN], ["inf", Infinity], ["-inf", -Infinity]]);  // how strict JSON carries them
/** @param {Stat} v @returns {number} */
const number = (v) => (NONFINITE.has(v) ? NONFINITE.get(v) : /** @type {number} */ (v));

export class GraphData {
  /** @param {CompactGraph} g */
  constructor(g) {
    this.g = g;
    this.strings = g.strings;
    this.n = g.nodes.kind.length;
    this.src = g.edges.src;
    this.dst = g.edges.dst;
    this.m = this.src.length;
    /** @type {Map<string, ModuleInfo>} */
    this.modules = new Map((g.modules || []).map((m) => [m[0], { type: m[1], params: m[2], bytes: m[3] }]));
    /** @type {Map<string, number> | null} */
    this._ids = null;
  }
  /** @param {number | null | undefined} index @returns {string | null} */
  s(index) { return index === -1 || index === undefined || index === null ? null : this.strings[index]; }
  /** @param {number} i @returns {string} */
  id(i) { return this.g.nodes.id ? this.s(this.g.nodes.id[i]) : "n" + i; }
  /** @param {string} id @returns {number} the node's index, -1 for none */
  indexOf(id) {
    if (!this.g.nodes.id) {  // the ids are n0, n1, ...: read the index from the id (no map of a million ids)
      const i = /^n(0|[1-9][0-9]{0,15})$/.test(id) ? Number(id.slice(1)) : -1;
      return i < this.n ? i : -1;
    }
    if (!this._ids) {
      this._ids = new Map();
      for (let i = 0; i < this.n; i++) this._ids.set(this.id(i), i);
    }
    const found = this._ids.get(id);
    return found === undefined ? -1 : found;
  }
  /** @param {number} i @returns {string} */
  kind(i) { return this.s(this.g.nodes.kind[i]); }
  /** @param {number} i @returns {string} */
  name(i) { return this.s(this.g.nodes.name[i]) || ""; }
  /** @param {number} i @returns {string | null} */
  module(i) { return this.s(this.g.nodes.module[i]); }
  /** @param {number} i @returns {string | null} */
  source(i) { return this.s(this.g.nodes.source[i]); }
  /** @param {number} i @returns {number | null} */
  recency(i) { return this.g.nodes.recency[i]; }
  /** @param {number} i @returns {[string, string][]} */
  attrs(i) {
    const raw = row(this.g.nodes.attrs, i);
    /** @type {[string, string][]} */
    const pairs = [];
    if (raw) for (let k = 0; k + 1 < raw.length; k += 2) pairs.push([this.s(raw[k]), this.s(raw[k + 1])]);
    return pairs;
  }
  /** @param {number} i @returns {Tensor | null} */
  tensor(i) {
    const t = this.g.nodes.tensor[i];
    if (t === -1 || t === undefined) return null;
    const c = this.g.tensors;
    return {
      name: this.s(c.name[t]), shape: row(c.shape, t), dtype: this.s(c.dtype[t]), device: this.s(c.device[t]),
      numel: c.numel[t], bytes: c.bytes[t], requiresGrad: !!c.requires_grad[t], values: row(c.values, t),
      storage: this.s(c.storage[t]), freed: !!c.freed[t], storageBytes: c.storage_bytes[t],
      sharding: c.sharding ? this.s(c.sharding[t]) : null,
    };
  }
  /** @param {number} i @returns {string} */
  shapeText(i) {
    const t = this.g.nodes.tensor[i];
    if (t === -1 || t === undefined) return "";
    const shape = row(this.g.tensors.shape, t);
    return shape.length === 1 ? `(${shape[0]},)` : `(${Array.prototype.join.call(shape, ", ")})`;
  }
  /** @param {number} i @returns {Grad | null} */
  grad(i) { return this._grad(this.g.nodes.grad[i]); }
  /** @param {number} e @returns {Grad | null} */
  edgeGrad(e) { return this._grad(this.g.edges.grad[e]); }
  /** @param {number} k @returns {Grad | null} */
  _grad(k) {
    if (k === -1 || k === undefined) return null;
    const c = this.g.grads;
    return { numel: c.numel[k], norm: number(c.norm[k]), maxAbs: number(c.max_abs[k]), meanAbs: number(c.mean_abs[k]),
             nan: c.nan[k], inf: c.inf[k], zeroFraction: number(c.zero_fraction[k]), values: row(c.values, k) };
  }
  // The op where NaN/Inf first appears in backward, or -1.
  /** @returns {number} */
  origin() {
    const o = this.g.nonfinite_origin;
    return Number.isInteger(o) && o >= 0 && o < this.n ? o : -1;
  }
  /** @param {number} e @returns {EdgeKind} */
  edgeKind(e) { return EDGE_KINDS[this.g.edges.kind[e]] || "data"; }
  /** @returns {number[]} */
  outputs() {
    const found = [];
    for (let i = 0; i < this.n; i++) if (this.kind(i) === "output") found.push(i);
    return found;
  }
}
