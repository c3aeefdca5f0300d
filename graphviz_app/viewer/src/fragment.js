// @ts-check
// The view in the URL fragment: open boxes, shown instances, the selected node, the colouring.
// #open=0.3.7&inst=7:2&sel=n42&color=gradient  (boxes by their numbers in the graph data)
// #expand=layers.3,head  (module boxes by name, opened with the boxes around them: for links written by hand)
/** @typedef {import("./graph.js").GraphData} GraphData */
/** @typedef {import("./tree.js").Tree} Tree */

/**
 * A view read from a fragment: null (or empty) where the fragment does not say.
 * @typedef {object} FragmentView
 * @property {number[] | null} open
 * @property {Map<number, number>} inst  box -> shown instance
 * @property {number | null} sel  node index
 * @property {string | null} color
 * @property {string | null} query
 * @property {number[]} expand  boxes to open with the boxes around them
 */

/** @typedef {{sel: number | null, color: string}} ViewState */

export const MAX_EXPAND = 200;

/**
 * The view a URL fragment asks for; what names no box, node or colouring is left out.
 * @param {string} hash
 * @param {Tree} tree
 * @param {GraphData} graph
 * @param {string[]} overlayKeys
 * @returns {FragmentView}
 */
export function readFragment(hash, tree, graph, overlayKeys) {
  /** @type {FragmentView} */
  const view = { open: null, inst: new Map(), sel: null, color: null, query: null, expand: [] };
  const params = new URLSearchParams((hash || "").replace(/^#/, ""));
  const G = tree.parent.length;
  /** @param {string} s */
  const group = (s) => (/^\d+$/.test(s) && +s < G ? +s : null);
  if (params.has("open")) view.open = params.get("open").split(".").map(group).filter((g) => g !== null);
  for (const pair of (params.get("inst") || "").split(".")) {
    const [g, k] = pair.split(":");
    if (group(g) !== null && /^\d+$/.test(k || "") && +k < Math.max(1, tree.count[+g])) view.inst.set(+g, +k);
  }
  const sel = params.get("sel");
  if (sel && graph.indexOf(sel) >= 0) view.sel = graph.indexOf(sel);
  const color = params.get("color");
  if (color && (color === "kind" || overlayKeys.includes(color))) view.color = color;
  const byName = new Map();
  for (let g = 0; g < G; g++) if (tree.kind[g] === "module" && tree.module[g]) byName.set(tree.module[g], g);
  for (const name of (params.get("expand") || "").split(",").slice(0, MAX_EXPAND)) {
    const g = byName.get(name.trim());
    if (g !== undefined) view.expand.push(g);
  }
  const q = params.get("q");
  if (q) view.query = q.slice(0, 200);
  return view;
}

/**
 * The fragment that reads back as this view.
 * @param {Tree} tree
 * @param {GraphData} graph
 * @param {ViewState} state
 * @returns {string}
 */
export function writeFragment(tree, graph, state) {
  const parts = ["open=" + [...tree.open].sort((a, b) => a - b).join(".")];
  const inst = [...tree.selected].filter(([, k]) => k).map(([g, k]) => `${g}:${k}`);
  if (inst.length) parts.push("inst=" + inst.join("."));
  if (state.sel !== null) parts.push("sel=" + encodeURIComponent(graph.id(state.sel)));
  if (state.color && state.color !== "kind") parts.push("color=" + encodeURIComponent(state.color));
  return "#" + parts.join("&");
}
