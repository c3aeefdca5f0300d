// @ts-check
// A compare file's data (two payloads and diff()'s alignment, made by graphviz_app/viewer/compare.py),
// checked; and what the panes need from it: each box's counterpart, what each box holds, a node's rows.
import { checkPayload, decodeJson } from "./decode.js";

/** @typedef {import("./types.js").Payload} Payload */
/** @typedef {import("./tree.js").Tree} Tree */

export const COMPARE_FORMAT = "graphviz-app-compare";
export const COMPARE_VERSION = 1;
/** A node's status, by its code in `status`. */
export const STATUSES = /** @type {const} */ (["same", "added", "removed", "changed"]);
/** What a box holds, as bits: a node added, removed or changed somewhere inside it. */
export const HOLDS = { added: 1, removed: 2, changed: 4 };

/**
 * @typedef {object} CompareData
 * @property {string} format
 * @property {number} version
 * @property {string} title
 * @property {[string, string]} labels
 * @property {[Payload, Payload]} panes
 * @property {[number[], number[]]} match  per side, per node: the other side's node index, -1 for none
 * @property {[number[], number[]]} status  per side, per node: the index of its status in STATUSES
 * @property {[Record<string, [string, string, string][]>, Record<string, [string, string, string][]>]} changes
 *   per side: a changed node's rows (what, before, after), by its index
 * @property {[number[], number[]]} [edges]  per side: the indices of the edges the other graph lacks
 * @property {Record<string, number>} counts
 * @property {string} summary
 */

/** @param {string} text @returns {Promise<CompareData>} */
export async function decodeCompare(text) {
  return checkCompare(await decodeJson(text));
}

/**
 * `raw` as CompareData, after checking both payloads and that the alignment joins nodes that exist.
 * @param {unknown} raw
 * @returns {CompareData}
 */
export function checkCompare(raw) {
  const data = /** @type {CompareData} */ (raw);
  if (!data || data.format !== COMPARE_FORMAT) throw new Error("this is not graphviz-app compare data");
  if (data.version !== COMPARE_VERSION) {
    throw new Error(`the compare data is of version ${data.version}; this viewer reads version ${COMPARE_VERSION}: save it again with this graphviz-app`);
  }
  if (!Array.isArray(data.panes) || data.panes.length !== 2) throw new Error("the compare data does not hold two graphs");
  if (!Array.isArray(data.labels) || data.labels.length !== 2) throw new Error("the compare data lacks its two labels");
  data.panes.forEach((p, side) => {
    try {
      checkPayload(p);
    } catch (e) {
      throw new Error(`graph ${data.labels[side]}: ${e instanceof Error ? e.message : String(e)}`);
    }
  });
  const sizes = data.panes.map((p) => p.graph.nodes.kind.length);
  for (const side of [0, 1]) {
    const match = data.match && data.match[side], status = data.status && data.status[side];
    if (!Array.isArray(match) || !Array.isArray(status) || match.length !== sizes[side] || status.length !== sizes[side]) {
      throw new Error(`the alignment of graph ${data.labels[side]} does not match its ${sizes[side]} nodes: save it again`);
    }
    for (let i = 0; i < match.length; i++) {
      const j = match[i];
      if (!Number.isInteger(j) || j < -1 || j >= sizes[1 - side] || (j >= 0 && data.match[1 - side][j] !== i)) {
        throw new Error(`node ${i} of graph ${data.labels[side]} is aligned with node ${j}, which does not align back: save it again`);
      }
    }
  }
  if (!Array.isArray(data.changes) || data.changes.length !== 2) data.changes = [{}, {}];
  if (!Array.isArray(data.edges) || data.edges.length !== 2) data.edges = [[], []];
  return data;
}

/**
 * A box's key: its kind, module (else label) and instance, from the root down.
 * @param {Tree} tree @param {number} g @returns {string}
 */
function boxKey(tree, g) {
  return tree.groupPath(g).map((h) => `${tree.kind[h]}|${tree.module[h] ?? tree.label[h]}|${tree.instance[h]}`).join("/");
}

/**
 * For each box of `from`, the box of `to` standing for the same part of the model (0, the graph, when
 * none does): the box with the same path of modules, else the box around a matched node inside it, at
 * the same depth or above.
 * @param {Tree} from @param {Tree} to
 * @param {number[]} match  per node of `from`: its node in `to`, -1 for none
 * @returns {Int32Array}
 */
export function matchBoxes(from, to, match) {
  const G = from.parent.length;
  /** @type {Map<string, number>} */
  const keys = new Map();
  for (let h = 0; h < to.parent.length; h++) keys.set(boxKey(to, h), h);
  const found = new Int32Array(G);
  const inside = new Int32Array(G).fill(-1);  // a matched node inside each box of `from`
  for (let i = 0; i < match.length; i++) {
    if (match[i] < 0) continue;
    for (let g = from.nodeGroup[i]; g !== -1 && inside[g] === -1; g = from.parent[g]) inside[g] = i;
  }
  for (let g = 1; g < G; g++) {
    const same = keys.get(boxKey(from, g));
    if (same !== undefined) { found[g] = same; continue; }
    if (inside[g] < 0) continue;
    let h = to.nodeGroup[match[inside[g]]];
    while (h > 0 && to.depth[h] > from.depth[g]) h = to.parent[h];
    found[g] = Math.max(0, h);
  }
  return found;
}

/**
 * Per box: what it holds (HOLDS bits) of the nodes inside it that are not the same in the other graph.
 * @param {Tree} tree @param {number[]} status @returns {Uint8Array}
 */
export function boxHolds(tree, status) {
  const holds = new Uint8Array(tree.parent.length);
  for (let i = 0; i < status.length; i++) {
    const bit = HOLDS[/** @type {"added" | "removed" | "changed"} */ (STATUSES[status[i]])] || 0;
    if (!bit) continue;
    for (let g = tree.nodeGroup[i]; g !== -1 && !(holds[g] & bit); g = tree.parent[g]) holds[g] |= bit;
  }
  return holds;
}

/**
 * The class a box's outline takes from what it holds: removed or added first, then changed ("" for none).
 * @param {number} holds @returns {string}
 */
export function holdsClass(holds) {
  if (holds & HOLDS.removed) return "gv-cmp-holds-removed";
  if (holds & HOLDS.added) return "gv-cmp-holds-added";
  return holds & HOLDS.changed ? "gv-cmp-holds-changed" : "";
}

/**
 * The details rows a compare file adds to node i of `side`: its counterpart and what changed.
 * @param {CompareData} data @param {0 | 1} side @param {number} i
 * @param {(j: number) => string} otherName  a node of the other graph, named
 * @returns {[string, string][]}
 */
export function compareRows(data, side, i, otherName) {
  const own = data.labels[side], other = data.labels[1 - side];
  const j = data.match[side][i];
  /** @type {[string, string][]} */
  const rows = [[`in ${other}`, j >= 0 ? otherName(j) : `none: only in ${own} (${side === 0 ? "removed" : "added"})`]];
  for (const [what, before, after] of data.changes[side][String(i)] || []) rows.push([`${what} changed`, `${before} → ${after}`]);
  return rows;
}

/**
 * The compare file's line above the panes: what differs, in words.
 * @param {CompareData} data @returns {string}
 */
export function summaryText(data) {
  const count = (/** @type {number} */ side, /** @type {number} */ code) => data.status[side].filter((c) => c === code).length;
  const [a, b] = data.labels;
  return `${a} ⟷ ${b}: ${count(0, 2)} removed (only in ${a}), ${count(1, 1)} added (only in ${b}), ` +
    `${count(1, 3)} changed`;
}

/** A drawn edge's class, by rank: the most telling change among the graph edges it stands for wins. */
export const EDGE_MARKS = /** @type {const} */ (["", "gv-cmp-edge-changed", "gv-cmp-edge-added", "gv-cmp-edge-removed"]);

/**
 * Per edge of one side: 1 where the other graph lacks it.
 * @param {number[]} only  edge indices  @param {number} count  the graph's edges
 * @returns {Uint8Array}
 */
export function edgeFlags(only, count) {
  const flags = new Uint8Array(count);
  for (const e of only) if (Number.isInteger(e) && e >= 0 && e < count) flags[e] = 1;
  return flags;
}

/**
 * What each drawn edge shows, as drawEdges draws them: one line per pair of items ("n3" a node, "g2" a
 * box) standing for the ends of the graph edges in the open boxes. The line takes the class of the most
 * telling of its edges: one the other graph lacks (removed in a, added in b), else one whose end, hidden
 * inside a closed box, was added, removed or changed. A line between two drawn nodes is marked only
 * when its edge is in one graph (its ends show their own change).
 * @param {Tree} tree
 * @param {{src: ArrayLike<number>, dst: ArrayLike<number>}} graph
 * @param {Iterable<number>} open  the open boxes drawn (Scene.open)
 * @param {Uint8Array} only  per edge: 1 where the other graph lacks it (edgeFlags)
 * @param {number[]} status  per node: its code in STATUSES
 * @param {0 | 1} side
 * @returns {Map<string, string>}  "item>item" -> class, for the lines that show a change
 */
export function edgeMarks(tree, graph, open, only, status, side) {
  const oneSide = side ? 2 : 3;  // added in b, removed in a
  const rank = [0, 2, 3, 1];  // a hidden end's status code -> its line's rank: added, removed, changed
  /** @type {Map<string, number>} */
  const found = new Map();
  for (const g of open) {
    for (const e of tree.edgeList(g)) {
      const s = graph.src[e], d = graph.dst[e], ra = tree.rep(s), rb = tree.rep(d);
      if (ra === rb) continue;
      let r = only[e] ? oneSide : 0;
      if (r < 3 && ra !== "n" + s) r = Math.max(r, rank[status[s]] || 0);
      if (r < 3 && rb !== "n" + d) r = Math.max(r, rank[status[d]] || 0);
      if (!r) continue;
      const key = ra + ">" + rb;
      if ((found.get(key) || 0) < r) found.set(key, r);
    }
  }
  return new Map([...found].map(([key, r]) => [key, EDGE_MARKS[r]]));
}
