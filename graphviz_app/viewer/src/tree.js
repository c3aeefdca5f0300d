// @ts-check
// The boxes (groups) the graph is drawn in, which are open, and what is visible.
// Items are keys: "n<index>" for a node, "g<index>" for a box.

/** @typedef {import("./types.js").TreeData} TreeData */
/** @typedef {import("./types.js").ItemKey} ItemKey */
/** @typedef {import("./graph.js").GraphData} GraphData */

export class Tree {
  /** @param {TreeData} t @param {GraphData} graph */
  constructor(t, graph) {
    this.parent = t.parent;
    this.kind = t.kind;
    this.label = t.label;
    this.module = t.module;
    this.instance = t.instance;
    this.count = t.count;
    this.nodeGroup = t.node_group;
    this.nodeInstance = t.node_instance;
    this.graph = graph;
    const G = this.parent.length;
    /** @type {number[][]} */
    this.children = Array.from({ length: G }, () => /** @type {number[]} */ ([]));
    for (let g = 1; g < G; g++) if (this.parent[g] >= 0) this.children[this.parent[g]].push(g);
    this.depth = new Int32Array(G);
    for (let g = 0; g < G; g++) this.depth[g] = this._depth(g);
    /** @type {number[][]} */
    this.nodes = Array.from({ length: G }, () => /** @type {number[]} */ ([]));  // direct nodes, instance -1 or any
    for (let i = 0; i < graph.n; i++) this.nodes[this.nodeGroup[i]].push(i);
    this.size = new Float64Array(G);  // nodes in the subtree
    this.ops = new Float64Array(G);
    for (let i = 0; i < graph.n; i++) {
      const op = graph.kind(i) === "op";
      for (let g = this.nodeGroup[i]; g !== -1; g = this.parent[g]) {
        this.size[g] += 1;
        if (op) this.ops[g] += 1;
      }
    }
    /** @type {Set<number>} */
    this.open = new Set([0]);
    /** @type {Map<number, number>} */
    this.selected = new Map();  // roll or fold -> shown instance
    this._bucket();
  }
  /** @param {number} g @returns {number} */
  _depth(g) {
    let d = 0;
    for (let p = this.parent[g]; p !== -1; p = this.parent[p]) d++;
    return d;
  }
  /** The instance box g shows (a roll or fold), 0 by default. @param {number} g @returns {number} */
  shown(g) { return this.selected.get(g) || 0; }
  /** @param {number} g @returns {boolean} */
  isRepeat(g) { return this.kind[g] === "roll" || this.kind[g] === "fold"; }

  // The child of `g` on the way to node i, as an item key; null when hidden by a repeat's shown instance.
  /** @param {number} i @param {number} g @returns {number} */
  _childOf(i, g) {
    let h = this.nodeGroup[i];
    if (h === g) return i;
    while (this.parent[h] !== g) h = this.parent[h];
    return ~h;  // groups as negative numbers, nodes as themselves
  }
  _bucket() {
    // Each edge belongs to the layout of the lowest box holding both ends.
    const G = this.parent.length, graph = this.graph;
    // A fold's edges are kept per instance: a fold of 50,000 instances shows one at a time.
    /** @type {number[][]} */
    this.edgesAt = Array.from({ length: G }, () => /** @type {number[]} */ ([]));
    /** @type {Map<number, Map<number, number[]>>} */
    this.byInstance = new Map();
    for (let e = 0; e < graph.m; e++) {
      const s = graph.src[e], d = graph.dst[e];
      let a = this.nodeGroup[s], b = this.nodeGroup[d];
      while (this.depth[a] > this.depth[b]) a = this.parent[a];
      while (this.depth[b] > this.depth[a]) b = this.parent[b];
      while (a !== b) { a = this.parent[a]; b = this.parent[b]; }
      if (this.kind[a] !== "fold") { this.edgesAt[a].push(e); continue; }
      let buckets = this.byInstance.get(a);
      if (!buckets) this.byInstance.set(a, buckets = new Map());
      const ia = this.nodeGroup[s] === a ? this.nodeInstance[s] : -1;
      const ib = this.nodeGroup[d] === a ? this.nodeInstance[d] : -1;
      for (const k of ia === ib ? [ia] : ia === -1 ? [ib] : ib === -1 ? [ia] : [ia, ib]) {
        let list = buckets.get(k);
        if (!list) buckets.set(k, list = []);
        list.push(e);
      }
    }
  }
  // The edges whose lowest common box is g, as far as g shows them.
  /** @param {number} g @returns {number[]} */
  edgeList(g) {
    const buckets = this.byInstance.get(g);
    if (!buckets) return this.edgesAt[g];
    return (buckets.get(-1) || []).concat(buckets.get(this.shown(g)) || []);
  }
  // Whether item (node i or group ~g) is shown inside open group g.
  /** @param {number} child @param {number} g @returns {boolean} */
  _visibleIn(child, g) {
    if (!this.isRepeat(g)) return true;
    const inst = child >= 0 ? this.nodeInstance[child] : this.instance[~child];
    return inst === -1 || inst === this.shown(g);
  }
  // The items drawn inside open group g: [keys].
  /** @param {number} g @returns {ItemKey[]} */
  items(g) {
    /** @type {ItemKey[]} */
    const found = [];
    for (const i of this.nodes[g]) if (this._visibleIn(i, g)) found.push("n" + i);
    for (const c of this.children[g]) if (this._visibleIn(~c, g)) found.push("g" + c);
    return found;
  }
  // Edges among the items of open group g: [[fromKey, toKey, edgeIndex]], one per pair.
  /** @param {number} g @returns {[ItemKey, ItemKey, number][]} */
  edges(g) {
    /** @type {[ItemKey, ItemKey, number][]} */
    const found = [];
    const seen = new Set(), graph = this.graph;
    for (const e of this.edgeList(g)) {
      const a = this._childOf(graph.src[e], g), b = this._childOf(graph.dst[e], g);
      if (a === b || !this._visibleIn(a, g) || !this._visibleIn(b, g)) continue;
      const ka = a >= 0 ? "n" + a : "g" + ~a, kb = b >= 0 ? "n" + b : "g" + ~b;
      const pair = ka + ">" + kb;
      if (seen.has(pair)) continue;
      seen.add(pair);
      found.push([ka, kb, e]);
    }
    return found;
  }
  // The groups from the root down to node i's own group.
  /** @param {number} i @returns {number[]} */
  path(i) {
    const up = [];
    for (let g = this.nodeGroup[i]; g !== -1; g = this.parent[g]) up.push(g);
    return up.reverse();
  }
  /** The boxes from the root down to box g. @param {number} g @returns {number[]} */
  groupPath(g) {
    const up = [];
    for (let h = g; h !== -1; h = this.parent[h]) up.push(h);
    return up.reverse();
  }
  // What stands for node i in the drawing: its own key, or the closed (or showing another instance) box around it.
  /** @param {number} i @returns {ItemKey} */
  rep(i) {
    const path = this.path(i);
    for (let k = 1; k < path.length; k++) {
      const g = path[k], above = path[k - 1];
      if (!this._visibleIn(~g, above)) return "g" + above;
      if (!this.open.has(g)) return "g" + g;
    }
    const own = path[path.length - 1];
    return this._visibleIn(i, own) ? "n" + i : "g" + own;
  }
  // Open every box on node i's path and show the instances it is in.
  /** @param {number} i */
  reveal(i) {
    const path = this.path(i);
    for (let k = 0; k < path.length; k++) {
      const g = path[k];
      this.open.add(g);
      if (k + 1 < path.length && this.isRepeat(g)) this.selected.set(g, this.instance[path[k + 1]]);
    }
    const own = path[path.length - 1];
    if (this.kind[own] === "fold" && this.nodeInstance[i] >= 0) this.selected.set(own, this.nodeInstance[i]);
  }
  // Open box g and every box around it, showing the instances it is in.
  /** @param {number} g */
  revealGroup(g) {
    const path = this.groupPath(g);
    for (let k = 0; k < path.length; k++) {
      this.open.add(path[k]);
      if (k + 1 < path.length && this.kind[path[k]] === "roll") this.selected.set(path[k], this.instance[path[k + 1]]);
    }
  }
  /** Open box g (and those around it), or close it (and those inside it). @param {number} g */
  toggle(g) {
    if (g === 0) return;
    if (this.open.has(g)) {
      for (const h of [...this.open]) if (this.groupPath(h).includes(g)) this.open.delete(h);
    } else {
      for (const h of this.groupPath(g)) this.open.add(h);
      if (this.kind[g] === "roll") {  // show the inside of the shown instance at once
        const inst = this.children[g].find((c) => this.instance[c] === this.shown(g));
        if (inst !== undefined) this.open.add(inst);
      }
    }
  }
  /** Show instance `inst` (modulo the count) of repeat g. @param {number} g @param {number} inst */
  setInstance(g, inst) {
    const count = this.count[g];
    const k = ((inst % count) + count) % count;
    const was = this.children[g].find((c) => this.instance[c] === this.shown(g));
    this.selected.set(g, k);
    if (this.kind[g] === "roll" && was !== undefined && this.open.has(was)) {
      const now = this.children[g].find((c) => this.instance[c] === k);
      if (now !== undefined) this.open.add(now);
    }
  }
  // Visible open groups, parents before children.
  /** @returns {number[]} */
  openVisible() {
    const order = [0];
    /** @type {number[]} */
    const found = [];
    while (order.length) {
      const g = order.pop();
      found.push(g);
      for (const key of this.items(g)) {
        if (key[0] === "g") {
          const c = +key.slice(1);
          if (this.open.has(c)) order.push(c);
        }
      }
    }
    return found;
  }
  /** @param {number} g @returns {string} */
  title(g) {
    if (this.kind[g] === "part") return this.label[g] + ` (${this.size[g].toLocaleString()} nodes)`;
    if (this.kind[g] === "roll") return this.label[g];
    return this.label[g];
  }
}
