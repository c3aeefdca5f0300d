// @ts-check
// Marked nodes (an overlay's `mark`, e.g. the node running at the memory peak): a ring and a badge on
// the node, or on the closed box that stands for it.
import { el } from "./draw.js";

/**
 * Ring and badge the overlay's marked nodes (or the boxes standing for them).
 * @param {SVGGElement} viewport
 * @param {{scene: import("./types.js").Scene, graph: import("./graph.js").GraphData, tree: import("./tree.js").Tree,
 *          paint: import("./colour.js").Scale | null}} ctx
 */
export function drawMarks(viewport, { scene, graph, tree, paint }) {
  if (!paint || !paint.marks.size) return;
  for (const i of paint.marks) {
    if (i < 0 || i >= graph.n) continue;
    const key = tree.rep(i), b = scene.boxes.get(key);
    const sel = key[0] === "n" ? `[data-node="${CSS.escape(graph.id(i))}"]` : `[data-group="${key}"]`;
    const g = viewport.querySelector(sel);
    if (!g || !b) continue;
    g.classList.add("gv-marked");
    el("rect", { class: "gv-ring", x: -5, y: -5, width: b.w + 10, height: b.h + 10, rx: 10 }, g);
    const badge = el("g", { class: "gv-badge", transform: `translate(${b.w - 8},-7)` }, g);
    el("rect", { x: -34, y: -8, width: 40, height: 16, rx: 8 }, badge);
    const t = el("text", { x: -14, y: 4 }, badge);
    t.textContent = String(paint.overlay.mark_badge || "◎");
  }
}
