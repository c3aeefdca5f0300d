// @ts-check
// Search over every node, drawn or inside a closed box: its op or tensor name, module, shape, dtype, source.
/** @typedef {import("./graph.js").GraphData} GraphData */

export class Search {
  /** @param {GraphData} graph */
  constructor(graph) {
    this.graph = graph;
    /** @type {string[] | null} */
    this.texts = null;
    /** @type {string[]} the texts made so far (index() makes the rest) */
    this._made = [];
  }
  // Every node's text, made now (the rest of what indexSome has not made).
  index() {
    if (this.texts) return;
    this.indexSome(Infinity);
  }
  /**
   * Make node texts for about `ms` milliseconds (a million nodes take a few hundred: the page indexes them in
   * idle slices, so no input waits on it); whether every node's is made.
   * @param {number} ms
   * @returns {boolean}
   */
  indexSome(ms) {
    if (this.texts) return true;
    const g = this.graph, texts = this._made, until = performance.now() + ms;
    for (let i = texts.length; i < g.n; i++) {
      const t = g.tensor(i);
      texts.push([g.id(i), g.name(i), g.module(i) || "", t ? (t.name || "") + " " + g.shapeText(i) + " " + t.dtype : "",
        g.source(i) || ""].join(" ").toLowerCase());
      if ((i & 255) === 255 && performance.now() > until) return false;
    }
    this.texts = texts;
    return true;
  }
  /**
   * The nodes whose text holds `query` (any case), ops first, then in node order.
   * @param {string} query
   * @param {number} [limit]
   * @returns {number[]}
   */
  find(query, limit = 100000) {
    const q = query.trim().toLowerCase();
    if (!q) return [];
    this.index();
    const found = [];
    for (let i = 0; i < this.texts.length && found.length < limit; i++) if (this.texts[i].includes(q)) found.push(i);
    // Ops first: they are what a person looks for; tensors follow.
    /** @param {number} i */
    const op = (i) => (this.graph.kind(i) === "op" ? 0 : 1);
    return found.sort((a, b) => op(a) - op(b) || a - b);
  }
}
