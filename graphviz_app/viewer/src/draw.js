// @ts-check
// The SVG of a scene: box frames, edges, nodes. Every name goes in as text (textContent), never as markup.
import { textOn } from "./colour.js";
import { LINE_H, clip, textWidth } from "./scene.js";
import { TITLE_H } from "./layout.js";

/** @typedef {import("./types.js").Scene} Scene */
/** @typedef {import("./types.js").Box} Box */
/** @typedef {import("./types.js").Rankdir} Rankdir */
/** @typedef {import("./graph.js").GraphData} GraphData */
/** @typedef {import("./tree.js").Tree} Tree */
/** @typedef {import("./colour.js").Scale} Scale */

/**
 * What drawScene draws from.
 * @typedef {object} DrawContext
 * @property {Scene} scene
 * @property {GraphData} graph
 * @property {Tree} tree
 * @property {Scale | null} paint  the colouring, null for colour by kind
 * @property {string} markerId  the arrowhead's id
 * @property {Rankdir} rankdir
 */

const NS = "http://www.w3.org/2000/svg";
/**
 * An SVG element with attributes, appended to `parent`.
 * @param {string} name
 * @param {Record<string, string | number>} attrs
 * @param {Element} [parent]
 * @returns {SVGElement}
 */
export function el(name, attrs, parent) {
  const e = document.createElementNS(NS, name);
  for (const k in attrs) e.setAttribute(k, String(attrs[k]));
  if (parent) parent.appendChild(e);
  return e;
}
/** @param {Element} parent @param {number} x @param {number} y @param {string} content @param {string} [cls] */
function text(parent, x, y, content, cls) {
  const t = el("text", { x, y, class: cls || "" }, parent);
  t.textContent = content;
  return t;
}

/**
 * Draw `ctx.scene` into `layer` (replacing what was there).
 * @param {SVGGElement} layer
 * @param {DrawContext} ctx
 * @returns {[string, string][]} the drawn edges between items (boxes and nodes), from input to consumer
 */
export function drawScene(layer, ctx) {
  const { scene } = ctx;
  layer.replaceChildren();
  const frames = el("g", { class: "gv-frames" }, layer);
  const edges = el("g", { class: "gv-edges" }, layer);
  const nodes = el("g", { class: "gv-nodes" }, layer);
  for (const [key, b] of scene.boxes) {
    if (key === "g0") continue;
    if (key[0] === "g") drawGroup(b.open ? frames : nodes, +key.slice(1), b, ctx);
    else drawNode(nodes, +key.slice(1), b, ctx);
  }
  return drawEdges(edges, ctx);
}

/** @param {Element} parent @param {number} i @param {Box} b @param {DrawContext} ctx */
function drawNode(parent, i, b, { graph, scene, paint }) {
  const kind = graph.kind(i);
  const origin = i === graph.origin() ? " gv-origin" : "";
  const g = el("g", { class: `gv-node gv-${kind}${origin}`, "data-node": graph.id(i), transform: `translate(${b.x},${b.y})` }, parent);
  const shape = kind === "saved" ?
    el("path", { d: `M0,0H${b.w - 8}L${b.w},8V${b.h}H0Z` }, g) :
    el("rect", { width: b.w, height: b.h, rx: kind === "op" ? 8 : 2 }, g);
  shape.setAttribute("class", "gv-shape");
  if (paint) fillWith(g, shape, paint.node(i));
  const lines = scene.lines.get("n" + i);
  lines.forEach((line, k) => text(g, b.w / 2, 5 + LINE_H * (k + 0.8), line, k ? "gv-sub" : "gv-title"));
}

/** @param {Element} parent @param {number} gi @param {Box} b @param {DrawContext} ctx */
function drawGroup(parent, gi, b, { tree, paint, scene }) {
  const kind = tree.kind[gi];
  /** @type {Record<string, string>} */
  const attrs = { class: `gv-box gv-${kind} ${b.open ? "gv-open" : "gv-closed"}${b.open && scene.waiting.has(gi) ? " gv-waiting" : ""}`, "data-group": "g" + gi,
                  transform: `translate(${b.x},${b.y})` };
  const name = tree.module[gi];
  if (name !== null && name !== undefined && kind === "module") attrs["data-module"] = name;
  if (name !== null && name !== undefined && kind === "roll") attrs["data-roll"] = name;  // its first module
  const g = el("g", attrs, parent);
  const fill = paint ? paint.group(gi) : null;
  if (b.open) {
    el("rect", { class: "gv-frame", width: b.w, height: b.h, rx: 6 }, g);
    const bar = el("rect", { class: "gv-bar", width: b.w, height: TITLE_H, rx: 6 }, g);
    if (fill) fillWith(g, bar, fill);
    text(g, 10, 16, "▾ " + clip(tree.title(gi)) + (scene.waiting.has(gi) ? " · laying out…" : ""), "gv-frame-title");
    if (tree.isRepeat(gi)) {
      const x = b.w - 10, count = tree.count[gi], shown = tree.shown(gi) + 1;
      const t = text(g, x - 18, 16, `${shown.toLocaleString()} of ${count.toLocaleString()}`, "gv-instance");
      t.setAttribute("text-anchor", "end");
      text(g, x - 4, 16, "▶", "gv-next-instance").setAttribute("data-step", "1");
      const w = textWidth(`${shown.toLocaleString()} of ${count.toLocaleString()}`);
      text(g, x - 32 - w, 16, "◀", "gv-prev-instance").setAttribute("data-step", "-1");
    }
    return;
  }
  const stack = tree.isRepeat(gi) ? 3 : 0;
  if (stack) el("rect", { class: "gv-shape gv-behind", x: 6, y: -6 + stack, width: b.w - 6, height: b.h - 6, rx: 4 }, g);
  const r = el("rect", { class: "gv-shape", y: stack ? 3 : 0, width: b.w - (stack ? 6 : 0), height: b.h - (stack ? 3 : 0), rx: 4 }, g);
  if (fill) fillWith(g, r, fill);
  const lines = [clip(tree.title(gi)), null];
  const ops = tree.ops[gi];
  lines[1] = kind === "part" ? `${tree.size[gi].toLocaleString()} nodes` : `${ops.toLocaleString()} op${ops === 1 ? "" : "s"}${tree.isRepeat(gi) ? " in all" : ""}`;
  const w = b.w - (stack ? 6 : 0);
  lines.forEach((line, k) => text(g, w / 2, (stack ? 3 : 0) + 5 + LINE_H * (k + 0.8), line, k ? "gv-sub" : "gv-title"));
}

/**
 * Fill `shape` with a colouring's `fill` (over the theme's fill by kind), and the texts of `item` with the
 * colour that reads on it.
 * @param {SVGElement} item @param {SVGElement} shape @param {string} fill  "#rrggbb"
 */
function fillWith(item, shape, fill) {
  shape.setAttribute("fill", fill);
  shape.style.fill = fill;
  item.style.setProperty("--gv-text", textOn(fill));
}

// Anchor points of a box for an edge leaving (out) or entering it, by direction of flow.
/** @param {Box} b @param {boolean} out @param {Rankdir} rankdir @returns {[number, number]} */
function anchor(b, out, rankdir) {
  const cx = b.x + b.w / 2, cy = b.y + b.h / 2;
  switch (rankdir) {
    case "LR": return [out ? b.x + b.w : b.x, cy];
    case "RL": return [out ? b.x : b.x + b.w, cy];
    case "BT": return [cx, out ? b.y : b.y + b.h];
    default: return [cx, out ? b.y + b.h : b.y];
  }
}

/** The item of open box g holding node i. @param {Tree} tree @param {number} i @param {number} g @returns {string} */
function childKey(tree, i, g) {
  let h = tree.nodeGroup[i];
  if (h === g) return "n" + i;
  while (tree.parent[h] !== g) h = tree.parent[h];
  return "g" + h;
}

/** @param {Element} parent @param {DrawContext} ctx @returns {[string, string][]} */
function drawEdges(parent, { scene, graph, tree, paint, markerId, rankdir }) {
  const seen = new Set();
  /** @type {[string, string][]} */
  const pairs = [];
  for (const g of scene.open) {
    for (const e of tree.edgeList(g)) {
      const s = graph.src[e], d = graph.dst[e];
      const ra = tree.rep(s), rb = tree.rep(d);
      if (ra === rb) continue;
      const pair = ra + ">" + rb;
      if (seen.has(pair)) continue;
      seen.add(pair);
      pairs.push([ra, rb]);
      const ba = scene.boxes.get(ra), bb = scene.boxes.get(rb);
      if (!ba || !bb) continue;
      const route = scene.routes.get(childKey(tree, s, g) + ">" + childKey(tree, d, g));
      let dpath;
      const a = anchor(ba, true, rankdir), z = anchor(bb, false, rankdir);
      if (route && route.points.length >= 4) {
        const p = route.points;
        dpath = `M${a[0]},${a[1]}L${p[0][0]},${p[0][1]}C` + p.slice(1).map((q) => q.join(",")).join(" ") +
          `L${(route.end || p[p.length - 1]).join(",")}L${z[0]},${z[1]}`;
      } else {
        const mid = (a[1] + z[1]) / 2;
        dpath = rankdir === "TB" || rankdir === "BT" ?
          `M${a[0]},${a[1]}C${a[0]},${mid} ${z[0]},${mid} ${z[0]},${z[1]}` : `M${a[0]},${a[1]}L${z[0]},${z[1]}`;
      }
      const kind = graph.edgeKind(e);
      const p = el("path", { d: dpath, class: `gv-edge gv-edge-${kind}`, "marker-end": `url(#${markerId})` }, parent);
      p.setAttribute("data-edge", graph.id(s) + ">" + graph.id(d));
      if (paint && paint.overlay.key === "gradient" && kind === "data") {
        const gr = graph.edgeGrad(e);
        if (gr) p.style.stroke = paint.colour(gr.norm);  // over the style sheet's edge colour
      }
    }
  }
  return pairs;
}
