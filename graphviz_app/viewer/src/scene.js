// @ts-check
// Where everything goes: sizes (children first), each open box laid out, then absolute places.
import { PAD, TITLE_H } from "./layout.js";

/** @typedef {import("./types.js").ItemKey} ItemKey */
/** @typedef {import("./types.js").Size} Size */
/** @typedef {import("./types.js").Box} Box */
/** @typedef {import("./types.js").Route} Route */
/** @typedef {import("./types.js").Scene} Scene */
/** @typedef {import("./types.js").Layouter} Layouter */
/** @typedef {import("./types.js").LayoutResult} LayoutResult */
/** @typedef {import("./graph.js").GraphData} GraphData */
/** @typedef {import("./tree.js").Tree} Tree */

const FONT = "12px system-ui, -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif";
const LINE_H = 15;
const CHAR_W = 7;  // the width of a character where there is no canvas to measure with (node --test)
/** @type {CanvasRenderingContext2D | null} */
let ctx = null;
/** @type {Map<string, number>} */
const widths = new Map();
/** The width of `text` in px in the labels' font. @param {string} text @returns {number} */
export function textWidth(text) {
  let w = widths.get(text);
  if (w === undefined) {
    if (!ctx && typeof document !== "undefined") ctx = document.createElement("canvas").getContext("2d");
    if (ctx) ctx.font = FONT;
    w = ctx ? ctx.measureText(text).width : text.length * CHAR_W;
    if (widths.size > 50000) widths.clear();
    widths.set(text, w);
  }
  return w;
}
export { FONT, LINE_H };

const MAX_LABEL = 60;
/** A label cut to MAX_LABEL characters. @param {string} text @returns {string} */
export function clip(text) { return text.length > MAX_LABEL ? text.slice(0, MAX_LABEL - 1) + "…" : text; }

/** A node's label lines: its name, then its shape and dtype. @param {GraphData} graph @param {number} i @returns {string[]} */
export function nodeLines(graph, i) {
  const kind = graph.kind(i), t = graph.tensor(i);
  const lines = [clip(kind === "output" && t && t.name ? t.name : graph.name(i))];
  if (t && kind !== "op") lines.push(graph.shapeText(i) + " " + (t.dtype || ""));
  else if (t) lines.push(graph.shapeText(i));
  if (i === graph.origin()) lines.push("⚠ NaN/Inf origin");
  return lines;
}

/** A closed box's label lines: its title, then how many ops. @param {Tree} tree @param {number} g @returns {string[]} */
export function groupLines(tree, g) {
  const ops = tree.ops[g];
  const sub = tree.kind[g] === "part" ? `${tree.size[g].toLocaleString()} nodes` :
    `${ops.toLocaleString()} op${ops === 1 ? "" : "s"}` + (tree.isRepeat(g) ? " in all" : "");
  return [clip(tree.title(g)), sub];
}

/** @param {string[]} lines @param {number} extra @returns {Size} */
function boxSize(lines, extra) {
  const w = Math.max(...lines.map(textWidth)) + 18 + extra;
  return { w: Math.max(48, Math.ceil(w)), h: 10 + LINE_H * lines.length };
}

// The whole drawing for the tree's current state.
/**
 * @param {GraphData} graph
 * @param {Tree} tree
 * @param {Layouter} layouts
 * @returns {Scene}
 */
export function buildScene(graph, tree, layouts) {
  const open = tree.openVisible();  // parents first
  /** @type {Map<ItemKey, Size>} */
  const sizes = new Map();
  /** @type {Map<number, {items: ItemKey[], res: LayoutResult}>} */
  const inner = new Map();
  /** @type {Map<ItemKey, string[]>} */
  const lines = new Map();
  /** @type {Set<number>} */
  const waiting = new Set();
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
    if (res.placeholder) waiting.add(g);
    inner.set(g, { items, res });
    const title = g === 0 ? 0 : TITLE_H;
    const titleW = g === 0 ? 0 : textWidth(clip(tree.title(g))) + (tree.isRepeat(g) ? 150 : 40);
    sizes.set("g" + g, { w: Math.ceil(Math.max(res.w, titleW) + 2 * PAD), h: Math.ceil(res.h + 2 * PAD + title) });
  }
  /** @type {Map<ItemKey, Box>} */
  const boxes = new Map();
  const root = sizes.get("g0");
  boxes.set("g0", { x: 0, y: 0, w: root.w, h: root.h, open: true });
  /** @type {Map<string, Route>} */
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
      /** @param {import("./types.js").Point | null} pt @returns {import("./types.js").Point | null} */
      const shift = (pt) => pt && [pt[0] + ox, pt[1] + oy];
      routes.set(pair, { start: shift(r.start), points: r.points.map(shift), end: shift(r.end) });
    }
  }
  return { open, boxes, lines, routes, width: root.w, height: root.h, waiting };
}
