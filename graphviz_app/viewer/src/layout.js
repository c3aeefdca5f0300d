// @ts-check
// Lays out one open box at a time with Graphviz's dot (the @viz-js/viz WebAssembly build),
// and keeps each box's layout until what is inside it changes: opening a box lays out that box
// and the boxes around it, never its siblings' insides.
import { instance } from "@viz-js/viz";

/** @typedef {import("@viz-js/viz").Viz} Viz */
/** @typedef {import("./types.js").ItemKey} ItemKey */
/** @typedef {import("./types.js").Size} Size */
/** @typedef {import("./types.js").Point} Point */
/** @typedef {import("./types.js").Route} Route */
/** @typedef {import("./types.js").LayoutResult} LayoutResult */
/** @typedef {import("./types.js").Rankdir} Rankdir */

export const PAD = 10;       // inside an open box, around its contents
export const TITLE_H = 24;   // an open box's title bar
const PT_PER_IN = 72;
export const BIG = 80;  // items in a box laid out in the worker (a smaller box takes milliseconds: laid out at once)
const KEEP = 3;  // layouts kept per box: trying the opening view's levels, or closing a box again, reuses them

/** @type {Promise<Viz> | null} */
let vizPromise = null;
/** The one Graphviz instance of the page (compiled once). @returns {Promise<Viz>} */
export function viz() {
  if (!vizPromise) vizPromise = instance();
  return vizPromise;
}

/**
 * The DOT text laying out `items` (sizes in px) joined by `edges`: nodes are v0, v1, ... in item order.
 * @param {ItemKey[]} items
 * @param {Map<ItemKey, Size>} sizes
 * @param {[ItemKey, ItemKey, number][]} edges
 * @param {Rankdir} rankdir
 * @returns {string}
 */
export function dotText(items, sizes, edges, rankdir) {
  const index = new Map(items.map((k, i) => [k, i]));
  const lines = [`digraph{graph[rankdir=${rankdir},nodesep=0.22,ranksep=0.28];node[shape=box,fixedsize=true,label=""];`];
  items.forEach((k, i) => {
    const s = sizes.get(k);
    lines.push(`v${i}[width=${(s.w / PT_PER_IN).toFixed(3)},height=${(s.h / PT_PER_IN).toFixed(3)}];`);
  });
  for (const [a, b] of edges) lines.push(`v${index.get(a)}->v${index.get(b)};`);
  lines.push("}");
  return lines.join("");
}

/**
 * Graphviz's json0 output for `dotText(items, ...)` as places (centres, y down) and edge routes.
 * @param {string} json
 * @param {ItemKey[]} items
 * @returns {LayoutResult}
 */
export function readLayout(json, items) {
  /** @type {{bb: string, objects?: {name: string, pos: string}[], edges?: {tail: number, head: number, pos?: string}[]}} */
  const g = JSON.parse(json);
  const [, , bw, bh] = g.bb.split(",").map(Number);
  /** @type {(x: number, y: number) => Point} */
  const flip = (x, y) => [x, bh - y];
  const pos = new Map(), routes = new Map();
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

/**
 * The layout of a box holding one item: the item itself.
 * @param {ItemKey} item
 * @param {Size} s
 * @returns {LayoutResult}
 */
export function single(item, s) {
  return { w: s.w, h: s.h, pos: new Map([[item, { x: s.w / 2, y: s.h / 2 }]]), routes: new Map() };
}

/**
 * The key a box's layout is cached under: what is inside it and how big.
 * @param {ItemKey[]} items
 * @param {Map<ItemKey, Size>} sizes
 * @param {[ItemKey, ItemKey, number][]} edges
 * @returns {string}
 */
export function layoutKey(items, sizes, edges) {
  return items.map((k) => `${k}:${sizes.get(k).w | 0}x${sizes.get(k).h | 0}`).join(",") + "|" +
    edges.map(([a, b]) => a + ">" + b).join(",");
}

/**
 * Where a box's items go while its layout is being made: rows, in item order (no edge routes).
 * @param {ItemKey[]} items
 * @param {Map<ItemKey, Size>} sizes
 * @returns {LayoutResult}
 */
export function placeholder(items, sizes) {
  const per = Math.max(1, Math.ceil(Math.sqrt(items.length)));
  const pos = new Map();
  let x = 0, y = 0, rowH = 0, w = 0;
  items.forEach((k, i) => {
    const s = sizes.get(k);
    if (i % per === 0 && i) { y += rowH + 16; x = 0; rowH = 0; }
    pos.set(k, { x: x + s.w / 2, y: y + s.h / 2 });
    x += s.w + 16;
    rowH = Math.max(rowH, s.h);
    w = Math.max(w, x - 16);
  });
  return { w, h: y + rowH, pos, routes: new Map(), placeholder: true };
}

export class Layouts {
  /** @param {Viz} vizInstance @param {Rankdir} [rankdir] */
  constructor(vizInstance, rankdir) {
    this.viz = vizInstance;
    /** @type {Rankdir} */
    this.rankdir = rankdir || "TB";
    /** @type {Map<number, Map<string, LayoutResult>>} group -> its last few layouts by what was inside */
    this.cache = new Map();
    this.runs = 0;           // how many boxes were laid out (tests and the benchmark read it)
    /** @type {import("./worker.js").LayoutWorker | null | undefined} where big boxes are laid out (null: here) */
    this.worker = undefined;
    /** @type {() => import("./worker.js").LayoutWorker | null} starts it, when the first big box needs it */
    this.startWorker = () => null;
    this.sync = false;       // lay out here even a big box (while the opening view is chosen)
    /** @type {Set<string>} the layouts the worker is making, by group and key */
    this.pending = new Set();
    this.placeholders = 0;   // how many times a box was drawn before its layout (tests read it)
    this.inWorker = 0;       // how many boxes the worker laid out (tests read it)
    /** @type {() => void} called when the worker has made a layout */
    this.onReady = () => {};
  }
  /**
   * Box `group`'s layout, from the cache while what is inside it is unchanged.
   * @param {number} group
   * @param {ItemKey[]} items
   * @param {Map<ItemKey, Size>} sizes
   * @param {[ItemKey, ItemKey, number][]} edges
   * @returns {LayoutResult}
   */
  layout(group, items, sizes, edges) {
    const key = layoutKey(items, sizes, edges);
    let kept = this.cache.get(group);
    if (!kept) this.cache.set(group, kept = new Map());
    const cached = kept.get(key);
    if (cached) return cached;
    if (!this.sync && items.length >= BIG) {
      if (this.worker === undefined) this.worker = this.startWorker();
      if (this.worker && !this.worker.broken) return this._later(group, items, sizes, edges, key);
    }
    const result = this._run(items, sizes, edges);
    this.runs += 1;
    if (kept.size >= KEEP) kept.delete(kept.keys().next().value);
    kept.set(key, result);
    return result;
  }
  /**
   * Ask the worker for the layout and draw the box in rows meanwhile; onReady() once it is made.
   * @param {number} group @param {ItemKey[]} items @param {Map<ItemKey, Size>} sizes
   * @param {[ItemKey, ItemKey, number][]} edges @param {string} key
   * @returns {LayoutResult}
   */
  _later(group, items, sizes, edges, key) {
    const id = group + "|" + key;
    this.placeholders += 1;
    if (!this.pending.has(id)) {
      this.pending.add(id);
      const done = () => { this.pending.delete(id); this.onReady(); };
      this.worker.run(dotText(items, sizes, edges, this.rankdir)).then((json) => {
        const kept = this.cache.get(group);
        if (kept.size >= KEEP) kept.delete(kept.keys().next().value);
        kept.set(key, readLayout(json, items));
        this.runs += 1;
        this.inWorker += 1;
        done();
      }, done);  // a worker that failed is marked broken: the next refresh lays the box out here
    }
    return placeholder(items, sizes);
  }
  /** @param {ItemKey[]} items @param {Map<ItemKey, Size>} sizes @param {[ItemKey, ItemKey, number][]} edges @returns {LayoutResult} */
  _run(items, sizes, edges) {
    if (items.length === 1) return single(items[0], sizes.get(items[0]));
    const out = this.viz.render(dotText(items, sizes, edges, this.rankdir), { format: "json0" });
    if (out.status !== "success") throw new Error("the layout failed: " + out.errors.map((e) => e.message).join("; "));
    return readLayout(out.output, items);
  }
}

/**
 * "e,x,y s,x,y x,y x,y ..." -> the cubic Bézier points, with the arrow's end last.
 * @param {string} text
 * @param {(x: number, y: number) => Point} flip
 * @returns {Route}
 */
function parseSpline(text, flip) {
  /** @type {Point[]} */
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
