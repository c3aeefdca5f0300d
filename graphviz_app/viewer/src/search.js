// @ts-check
// Search over every node, drawn or inside a closed box: its op or tensor name, module, shape, dtype, source.
/** @typedef {import("./graph.js").GraphData} GraphData */

export class Search {
  /** @param {GraphData} graph */
  constructor(graph) {
    this.graph = graph;
    /** @type {string[] | null} */
    this.texts = null;
  }
  index() {
    if (this.texts) return;
    const g = this.graph, texts = new Array(g.n);
    for (let i = 0; i < g.n; i++) {
      const t = g.tensor(i);
      texts[i] = [g.id(i), g.name(i), g.module(i) || "", t ? (t.name || "") + " " + g.shapeText(i) + " " + t.dtype : "",
        g.source(i) || ""].join(" ").toLowerCase();
    }
    this.texts = texts;
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
