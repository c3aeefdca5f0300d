// Where everything goes: sizes (children first), each open box laid out, then absolute places.
import { PAD, TITLE_H } from "./layout.js";

const FONT = "12px system-ui, -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif";
const LINE_H = 15;
let ctx = null;
const widths = new Map();
export function textWidth(text) {
  let w = widths.get(text);
  if (w === undefined) {
    if (!ctx) ctx = document.createElement("canvas").getContext("2d");
    ctx.font = FONT;
    w = ctx.measureText(text).width;
    if (widths.size > 50000) widths.clear();
    widths.set(text, w);
  }
  return w;
}
export { FONT, LINE_H };

const MAX_LABEL = 60;
export function clip(text) { return text.length > MAX_LABEL ? text.slice(0, MAX_LABEL - 1) + "…" : text; }

export function nodeLines(graph, i) {
  const kind = graph.kind(i), t = graph.tensor(i);
  const lines = [clip(kind === "output" && t && t.name ? t.name : graph.name(i))];
  if (t && kind !== "op") lines.push(graph.shapeText(i) + " " + (t.dtype || ""));
  else if (t) lines.push(graph.shapeText(i));
  return lines;
}

export function groupLines(tree, g) {
  const ops = tree.ops[g];
  const sub = tree.kind[g] === "part" ? `${tree.size[g].toLocaleString()} nodes` :
    `${ops.toLocaleString()} op${ops === 1 ? "" : "s"}` + (tree.isRepeat(g) ? " in all" : "");
  return [clip(tree.title(g)), sub];
}

function boxSize(lines, extra) {
  const w = Math.max(...lines.map(textWidth)) + 18 + extra;
  return { w: Math.max(48, Math.ceil(w)), h: 10 + LINE_H * lines.length };
}

// The whole drawing for the tree's current state.
export function buildScene(graph, tree, layouts) {
  const open = tree.openVisible();  // parents first
  const sizes = new Map(), inner = new Map(), lines = new Map();
  for (let k = open.length - 1; k >= 0; k--) {
    const g = open[k];
    const items = tree.items(g);
    for (const key of items) {
      if (sizes.has(key)) continue;
      const isNode = key[0] === "n", id = +key.slice(1);
      const text = isNode ? nodeLines(graph, id) : groupLines(tree, id);
      lines.set(key, text);
      sizes.set(key, boxSize(text, isNode ? 0 : 6));
    }
    const edges = tree.edges(g);
    const res = layouts.layout(g, items, sizes, edges);
    inner.set(g, { items, res });
    const title = g === 0 ? 0 : TITLE_H;
    const titleW = g === 0 ? 0 : textWidth(clip(tree.title(g))) + (tree.isRepeat(g) ? 150 : 40);
    sizes.set("g" + g, { w: Math.ceil(Math.max(res.w, titleW) + 2 * PAD), h: Math.ceil(res.h + 2 * PAD + title) });
  }
  const boxes = new Map();  // key -> {x, y, w, h, open}
  const root = sizes.get("g0");
  boxes.set("g0", { x: 0, y: 0, w: root.w, h: root.h, open: true });
  const routes = new Map();  // "a>b" at the level where both are items -> absolute points
  for (const g of open) {
    const box = boxes.get("g" + g), { items, res } = inner.get(g);
    const ox = box.x + (box.w - res.w) / 2, oy = box.y + (g === 0 ? 0 : TITLE_H) + PAD;
    for (const key of items) {
      const p = res.pos.get(key), s = sizes.get(key);
      const isOpen = key[0] === "g" && tree.open.has(+key.slice(1));
      boxes.set(key, { x: ox + p.x - s.w / 2, y: oy + p.y - s.h / 2, w: s.w, h: s.h, open: isOpen });
    }
    for (const [pair, r] of res.routes) {
      const shift = (pt) => pt && [pt[0] + ox, pt[1] + oy];
      routes.set(pair, { start: shift(r.start), points: r.points.map(shift), end: shift(r.end) });
    }
  }
  return { open, boxes, lines, routes, width: root.w, height: root.h };
}
