// @ts-check
// The details panel: everything the model knows about a node or a box, as (label, text) rows.
import { bytes, format } from "./colour.js";

/** @typedef {import("./graph.js").GraphData} GraphData */
/** @typedef {import("./graph.js").Tensor} Tensor */
/** @typedef {import("./graph.js").Grad} Grad */
/** @typedef {import("./tree.js").Tree} Tree */
/** @typedef {import("./types.js").Overlay} Overlay */
/** @typedef {import("./types.js").Collective} Collective */
/** A details row: what, and its value in words. @typedef {[string, string]} Row */

/** @type {Record<string, string>} */
const KIND_TITLE = { output: "output tensor", op: "backward op", leaf: "leaf tensor (AccumulateGrad)",
  saved: "saved tensor", view_base: "base of a view" };
/** @type {Record<string, string>} */
const GROUP_TITLE = { module: "module", roll: "rolled repeats", fold: "folded run", part: "part of the graph", root: "graph" };

/** @param {Tensor} t @param {GraphData} graph @param {number} i @returns {Row[]} */
function tensorRows(t, graph, i) {
  if (t.freed) return [["tensor", "freed by backward"]];
  /** @type {Row[]} */
  const rows = [];
  if (t.name) rows.push(["tensor", t.name]);
  rows.push(["shape", graph.shapeText(i)], ["dtype", t.dtype], ["device", t.device],
    ["size", `${t.numel.toLocaleString()} element${t.numel === 1 ? "" : "s"}, ${bytes(t.bytes)}`]);
  if (t.storageBytes !== null && t.storageBytes !== undefined && t.storageBytes !== t.bytes) rows.push(["storage", bytes(t.storageBytes)]);
  if (t.sharding) rows.push(["sharding", t.sharding]);
  if (t.values) rows.push(["values", Array.prototype.join.call(t.values, ", ")]);
  rows.push(["requires grad", t.requiresGrad ? "yes" : "no"]);
  return rows;
}

/** @param {Grad} g @returns {Row[]} */
function gradRows(g) {
  /** @type {Row[]} */
  const rows = [["gradient norm", format(g.norm)], ["gradient max |g|", format(g.maxAbs)],
    ["gradient mean |g|", format(g.meanAbs)], ["gradient zeros", (100 * g.zeroFraction).toFixed(1) + "%"]];
  if (g.nan || g.inf) rows.push(["gradient non-finite", `${g.nan} nan, ${g.inf} inf of ${g.numel}`]);
  if (g.values) rows.push(["gradient values", Array.prototype.join.call(g.values, ", ")]);
  return rows;
}

/**
 * Node i's details.
 * @param {GraphData} graph
 * @param {number} i
 * @param {(i: number) => number[]} savedOf  the nodes whose tensors node i saved
 * @returns {Row[]}
 */
export function nodeRows(graph, i, savedOf) {
  /** @type {Row[]} */
  const rows = [["kind", KIND_TITLE[graph.kind(i)] || graph.kind(i)], ["id", graph.id(i)]];
  const t = graph.tensor(i);
  if (t) rows.push(...tensorRows(t, graph, i));
  for (const [k, v] of graph.attrs(i)) rows.push(["attribute " + k, v]);
  for (const s of savedOf(i)) {
    const st = graph.tensor(s);
    rows.push(["saved", `${graph.name(s)}: ` + (!st || st.freed ? "freed by backward" : `${graph.shapeText(s)} ${st.dtype} ${bytes(st.bytes)}`)]);
  }
  const module = graph.module(i);
  if (module !== null) {
    const info = graph.modules.get(module);
    rows.push(["module", (module || "(the root module)") + (info && info.type ? ` (${info.type})` : "")]);
    if (info && info.params) rows.push(["module parameters", `${info.params.toLocaleString()} (${bytes(info.bytes)})`]);
  }
  if (graph.source(i)) rows.push(["source", graph.source(i)]);
  const r = graph.recency(i);
  if (r !== null && r !== undefined) rows.push(["recency", String(r)]);
  const g = graph.grad(i);
  if (g) rows.push(...gradRows(g));
  if (i === graph.origin()) rows.push(["NaN/Inf origin", "the first op in backward whose gradient is NaN or Inf"]);
  return rows;
}

/**
 * Box g's details, with its value in every overlay (in words where the overlay gives them: a check's verdict).
 * @param {GraphData} graph
 * @param {Tree} tree
 * @param {number} g
 * @param {Overlay[]} overlays
 * @returns {Row[]}
 */
export function groupRows(graph, tree, g, overlays) {
  const kind = tree.kind[g];
  /** @type {Row[]} */
  const rows = [["kind", GROUP_TITLE[kind] || kind]];
  const name = tree.module[g];
  if (name !== null && name !== undefined && (kind === "module" || kind === "roll")) {
    const info = graph.modules.get(name);
    rows.push(["module", name || "(the root module)"]);
    if (info && info.type) rows.push(["type", info.type]);
    if (info && info.params && kind === "module") rows.push(["parameters", `${info.params.toLocaleString()} (${bytes(info.bytes)})`]);
  }
  if (tree.isRepeat(g)) rows.push(["instances", tree.count[g].toLocaleString() + ` (showing ${(tree.shown(g) + 1).toLocaleString()})`]);
  rows.push(["ops", tree.ops[g].toLocaleString()], ["nodes", tree.size[g].toLocaleString()]);
  for (const o of overlays) {
    const words = (o.text || [])[g];
    const v = (o.group || [])[g];
    if (words) rows.push([o.key, words]);
    else if (v !== null && v !== undefined) rows.push([o.key === "gradient" ? "largest gradient norm" : o.label, format(v, o.unit)]);
  }
  return rows;
}

/**
 * Node i's value in each overlay but the gradient's (in the details already), in words where the overlay gives them.
 * @param {Overlay[]} overlays
 * @param {number} i
 * @returns {Row[]}
 */
export function overlayRows(overlays, i) {
  /** @type {Row[]} */
  const rows = [];
  for (const o of overlays) {
    const words = (o.node_text || [])[i];
    const v = o.node[i];
    if (words) rows.push([o.key, words]);
    else if (o.key !== "gradient" && v !== null && v !== undefined) rows.push([o.label, format(v, o.unit)]);
  }
  return rows;
}

/**
 * A collective in words: "_allgather_base_ 129.3 KiB (backward)".
 * @param {Collective} e
 * @returns {string}
 */
export function collectiveText(e) {
  return `${e.op} ${bytes(e.bytes)} (${e.phase})`;
}

/**
 * Rows for the collectives node i issued (a rank's all-gathers, reduce-scatters, all-reduces).
 * @param {Collective[]} events
 * @param {number} i
 * @returns {Row[]}
 */
export function collectiveRows(events, i) {
  return events.filter((e) => e.node === i).map((e) => /** @type {Row} */ (["collective issued", collectiveText(e)]));
}
