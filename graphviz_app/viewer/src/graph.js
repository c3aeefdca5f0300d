// Read access to the compact (schema 3) graph: one array per field, strings in one table.
const EDGE_KINDS = ["data", "saved", "view"];
const NONFINITE = new Map([["nan", NaN], ["inf", Infinity], ["-inf", -Infinity]]);  // how strict JSON carries them
const number = (v) => (NONFINITE.has(v) ? NONFINITE.get(v) : v);

export class GraphData {
  constructor(g) {
    this.g = g;
    this.strings = g.strings;
    this.n = g.nodes.kind.length;
    this.src = g.edges.src;
    this.dst = g.edges.dst;
    this.m = this.src.length;
    this.modules = new Map((g.modules || []).map((row) => [row[0], { type: row[1], params: row[2], bytes: row[3] }]));
    this._ids = null;
  }
  s(index) { return index === -1 || index === undefined || index === null ? null : this.strings[index]; }
  id(i) { return this.g.nodes.id ? this.s(this.g.nodes.id[i]) : "n" + i; }
  indexOf(id) {
    if (!this._ids) {
      this._ids = new Map();
      for (let i = 0; i < this.n; i++) this._ids.set(this.id(i), i);
    }
    const found = this._ids.get(id);
    return found === undefined ? -1 : found;
  }
  kind(i) { return this.s(this.g.nodes.kind[i]); }
  name(i) { return this.s(this.g.nodes.name[i]) || ""; }
  module(i) { return this.s(this.g.nodes.module[i]); }
  source(i) { return this.s(this.g.nodes.source[i]); }
  recency(i) { return this.g.nodes.recency[i]; }
  attrs(i) {
    const raw = this.g.nodes.attrs[i];
    const pairs = [];
    if (raw) for (let k = 0; k + 1 < raw.length; k += 2) pairs.push([this.s(raw[k]), this.s(raw[k + 1])]);
    return pairs;
  }
  tensor(i) {
    const t = this.g.nodes.tensor[i];
    if (t === -1 || t === undefined) return null;
    const c = this.g.tensors;
    return {
      name: this.s(c.name[t]), shape: c.shape[t], dtype: this.s(c.dtype[t]), device: this.s(c.device[t]),
      numel: c.numel[t], bytes: c.bytes[t], requiresGrad: !!c.requires_grad[t], values: c.values[t],
      storage: this.s(c.storage[t]), freed: !!c.freed[t], storageBytes: c.storage_bytes[t],
    };
  }
  shapeText(i) {
    const t = this.g.nodes.tensor[i];
    if (t === -1 || t === undefined) return "";
    const shape = this.g.tensors.shape[t];
    return shape.length === 1 ? `(${shape[0]},)` : `(${shape.join(", ")})`;
  }
  grad(i) { return this._grad(this.g.nodes.grad[i]); }
  edgeGrad(e) { return this._grad(this.g.edges.grad[e]); }
  _grad(k) {
    if (k === -1 || k === undefined) return null;
    const c = this.g.grads;
    return { numel: c.numel[k], norm: number(c.norm[k]), maxAbs: number(c.max_abs[k]), meanAbs: number(c.mean_abs[k]),
             nan: c.nan[k], inf: c.inf[k], zeroFraction: number(c.zero_fraction[k]), values: c.values[k] };
  }
  // The op where NaN/Inf first appears in backward, or -1.
  origin() {
    const o = this.g.nonfinite_origin;
    return Number.isInteger(o) && o >= 0 && o < this.n ? o : -1;
  }
  edgeKind(e) { return EDGE_KINDS[this.g.edges.kind[e]] || "data"; }
  outputs() {
    const found = [];
    for (let i = 0; i < this.n; i++) if (this.kind(i) === "output") found.push(i);
    return found;
  }
}
