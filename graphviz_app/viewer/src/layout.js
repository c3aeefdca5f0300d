// Lays out one open box at a time with Graphviz's dot (the @viz-js/viz WebAssembly build),
// and keeps each box's layout until what is inside it changes: opening a box lays out that box
// and the boxes around it, never its siblings' insides.
import { instance } from "@viz-js/viz";

export const PAD = 10;       // inside an open box, around its contents
export const TITLE_H = 24;   // an open box's title bar
const PT_PER_IN = 72;

let vizPromise = null;
export function viz() {
  if (!vizPromise) vizPromise = instance();
  return vizPromise;
}

export class Layouts {
  constructor(vizInstance, rankdir) {
    this.viz = vizInstance;
    this.rankdir = rankdir || "TB";
    this.cache = new Map();  // group -> {key, result}
    this.runs = 0;           // how many boxes were laid out (tests and the benchmark read it)
  }
  // items: [key]; sizes: Map key -> {w, h}; edges: [[a, b, e]]. Returns {w, h, pos: Map key -> {x, y}, routes: Map "a>b" -> [[x, y]...]}.
  layout(group, items, sizes, edges) {
    const key = items.map((k) => `${k}:${sizes.get(k).w | 0}x${sizes.get(k).h | 0}`).join(",") + "|" +
      edges.map(([a, b]) => a + ">" + b).join(",");
    const cached = this.cache.get(group);
    if (cached && cached.key === key) return cached.result;
    const result = this._run(items, sizes, edges);
    this.runs += 1;
    this.cache.set(group, { key, result });
    return result;
  }
  _run(items, sizes, edges) {
    const pos = new Map(), routes = new Map();
    if (items.length === 1) {
      const s = sizes.get(items[0]);
      pos.set(items[0], { x: s.w / 2, y: s.h / 2 });
      return { w: s.w, h: s.h, pos, routes };
    }
    const index = new Map(items.map((k, i) => [k, i]));
    const lines = [`digraph{graph[rankdir=${this.rankdir},nodesep=0.22,ranksep=0.32];node[shape=box,fixedsize=true,label=""];`];
    items.forEach((k, i) => {
      const s = sizes.get(k);
      lines.push(`v${i}[width=${(s.w / PT_PER_IN).toFixed(3)},height=${(s.h / PT_PER_IN).toFixed(3)}];`);
    });
    for (const [a, b] of edges) lines.push(`v${index.get(a)}->v${index.get(b)};`);
    lines.push("}");
    const out = this.viz.render(lines.join(""), { format: "json0" });
    if (out.status !== "success") throw new Error("the layout failed: " + out.errors.map((e) => e.message).join("; "));
    const g = JSON.parse(out.output);
    const [, , bw, bh] = g.bb.split(",").map(Number);
    const flip = (x, y) => [x, bh - y];
    for (const o of g.objects || []) {
      const i = +o.name.slice(1);
      const [x, y] = o.pos.split(",").map(Number);
      const [fx, fy] = flip(x, y);
      pos.set(items[i], { x: fx, y: fy });
    }
    for (const e of g.edges || []) {
      const a = items[+g.objects[e.tail].name.slice(1)], b = items[+g.objects[e.head].name.slice(1)];
      routes.set(a + ">" + b, parseSpline(e.pos || "", flip));
    }
    return { w: bw, h: bh, pos, routes };
  }
}

// "e,x,y s,x,y x,y x,y ..." -> the cubic Bézier points, with the arrow's end last.
function parseSpline(text, flip) {
  const points = [];
  let end = null, start = null;
  for (const token of text.split(/\s+/)) {
    if (!token) continue;
    const parts = token.split(",");
    if (parts[0] === "e") end = flip(+parts[1], +parts[2]);
    else if (parts[0] === "s") start = flip(+parts[1], +parts[2]);
    else points.push(flip(+parts[0], +parts[1]));
  }
  return { start, points, end };
}
