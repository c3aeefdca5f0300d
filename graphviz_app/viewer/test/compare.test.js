// @ts-check
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { EDGE_MARKS, HOLDS, STATUSES, boxHolds, checkCompare, compareRows, edgeFlags, edgeMarks, holdsClass, matchBoxes, summaryText } from "../src/compare.js";
import { GraphData } from "../src/graph.js";
import { Tree } from "../src/tree.js";

/** @typedef {import("../src/compare.js").CompareData} CompareData */

/** @returns {CompareData} the fixture Python's compare_payload() made: three blocks (fp32) against two (bf16) */
const raw = () => JSON.parse(readFileSync(new URL("./fixtures/compare.json", import.meta.url), "utf8"));

function loadedPair() {
  const data = checkCompare(raw());
  const [a, b] = data.panes.map((p) => {
    const graph = new GraphData(p.graph);
    return { graph, tree: new Tree(p.tree, graph) };
  });
  return { data, a, b };
}

/** @param {{graph: GraphData, tree: Tree}} side @param {string} module @returns {number} */
const box = (side, module) => {
  const g = side.tree.module.findIndex((m, k) => m === module && side.tree.kind[k] === "module");
  if (g < 0) throw new Error("no box " + module);
  return g;
};

test("each box of one graph has the box of the same module in the other; a removed module's box has none", () => {
  const { data, a, b } = loadedPair();
  const ab = matchBoxes(a.tree, b.tree, data.match[0]);
  const ba = matchBoxes(b.tree, a.tree, data.match[1]);
  for (const m of ["head", "blocks", "blocks.0", "blocks.1.fc"]) {
    assert.equal(ab[box(a, m)], box(b, m), m);
    assert.equal(ba[box(b, m)], box(a, m), m);
  }
  const roll = a.tree.kind.indexOf("roll");
  assert.equal(b.tree.kind[ab[roll]], "roll");  // blocks.0–2 ×3 stands for blocks.0–1 ×2
  // blocks.2 is only in fp32 and holds no matched node: it has no counterpart (0, the graph).
  assert.equal(ab[box(a, "blocks.2")], 0);
});

test("a box holds what changed inside it: the removed layer's boxes are outlined as removed", () => {
  const { data, a, b } = loadedPair();
  const holdsA = boxHolds(a.tree, data.status[0]), holdsB = boxHolds(b.tree, data.status[1]);
  assert.equal(holdsClass(holdsA[box(a, "blocks.2")]), "gv-cmp-holds-removed");
  assert.equal(holdsA[0] & HOLDS.removed, HOLDS.removed);
  assert.equal(holdsClass(holdsB[box(b, "blocks.0.fc")]), "gv-cmp-holds-changed");  // its saved mat1 in bfloat16
  assert.equal(holdsClass(holdsB[box(b, "head")]), "");
  assert.equal(holdsB[0] & HOLDS.removed, 0);  // nothing is removed from the second graph's side
});

test("a node's rows name its counterpart and what changed, or say it is in one graph only", () => {
  const { data, a, b } = loadedPair();
  const changed = data.status[1].indexOf(STATUSES.indexOf("changed"));
  const rows = compareRows(data, 1, changed, (j) => a.graph.name(j));
  assert.deepEqual(rows[0], ["in fp32", "mat1"]);
  assert.ok(rows.some(([k, v]) => k === "dtype changed" && v === "float32 → bfloat16"));
  const removed = data.status[0].indexOf(STATUSES.indexOf("removed"));
  assert.deepEqual(compareRows(data, 0, removed, (j) => b.graph.name(j)), [["in bf16", "none: only in fp32 (removed)"]]);
  assert.equal(summaryText(data), "fp32 ⟷ bf16: 4 removed (only in fp32), 0 added (only in bf16), 2 changed");
});

test("damaged compare data is refused with what is wrong", () => {
  assert.throws(() => checkCompare({ format: "graphviz-app-viewer" }), /not graphviz-app compare data/);
  assert.throws(() => checkCompare({ ...raw(), version: 9 }), /version 9; this viewer reads version 1/);
  const short = raw();
  short.match[0] = short.match[0].slice(1);
  assert.throws(() => checkCompare(short), /alignment of graph fp32 does not match its 15 nodes/);
  const oneWay = raw();
  const i = oneWay.match[0].findIndex((j) => j >= 0);
  oneWay.match[0][i] = oneWay.match[0][i] === 0 ? 1 : 0;
  assert.throws(() => checkCompare(oneWay), /does not align back/);
  const broken = raw();
  broken.panes[1].graph.edges.src[0] = 999;
  assert.throws(() => checkCompare(broken), /graph bf16: edge 0 joins nodes 999/);
});

test("the edges only one graph has are flagged by index", () => {
  const { data, a, b } = loadedPair();
  const removed = edgeFlags(data.edges[0], a.graph.m), added = edgeFlags(data.edges[1], b.graph.m);
  assert.equal(removed.length, a.graph.m);
  // blocks.2's weight feeds its AddmmBackward0 in fp32 only.
  const weight = [...Array(a.graph.n).keys()].find((i) => a.graph.name(i) === "blocks.2.fc.weight");
  assert.ok([...Array(a.graph.m).keys()].some((e) => removed[e] && a.graph.src[e] === weight));
  // bf16 has no node fp32 lacks; its new edge joins blocks.1's act to the head, which fed on blocks.2 before.
  assert.ok(!data.match[1].includes(-1));
  const head = [...Array(b.graph.n).keys()].find((i) => b.graph.module(i) === "head");
  assert.deepEqual([...Array(b.graph.m).keys()].filter((e) => added[e]).map((e) => b.graph.dst[e]), [head]);
  assert.deepEqual([...edgeFlags([-1, 99, 0.5], 3)], [0, 0, 0]);  // damaged indices flag nothing
});

/** The marks of one pane with only the boxes in `open` open (and the graph). */
function marksOf(/** @type {0 | 1} */ side, /** @type {number[]} */ open, /** @type {number[] | null} */ status = null) {
  const { data, a, b } = loadedPair();
  const { graph, tree } = side ? b : a;
  tree.open = new Set([0, ...open]);
  const flags = edgeFlags(data.edges[side], graph.m);
  return { graph, tree, marks: edgeMarks(tree, graph, tree.openVisible(), flags, status || data.status[side], side) };
}

test("a line between closed boxes takes the change of the edges it stands for, in each pane", () => {
  // Everything closed: the blocks box feeds the head box; blocks.2's act fed it in fp32, blocks.1's in bf16.
  const a = marksOf(0, []), b = marksOf(1, []);
  const blocks = (/** @type {{tree: Tree}} */ s) => "g" + s.tree.module.indexOf("blocks");
  const head = (/** @type {{tree: Tree}} */ s) => "g" + s.tree.module.indexOf("head");
  assert.deepEqual([...a.marks], [[`${blocks(a)}>${head(a)}`, "gv-cmp-edge-removed"]]);
  assert.deepEqual([...b.marks], [[`${blocks(b)}>${head(b)}`, "gv-cmp-edge-added"]]);
  assert.deepEqual(EDGE_MARKS.slice(1), ["gv-cmp-edge-changed", "gv-cmp-edge-added", "gv-cmp-edge-removed"]);
});

test("a line into a closed box is marked changed when the node it reaches inside changed, not when it shows", () => {
  const { data, b } = loadedPair();
  // bf16's first layer's AddmmBackward0 (the one x feeds), as if it had changed
  const x = [...Array(b.graph.n).keys()].find((i) => b.graph.name(i) === "x");
  const fed = [...Array(b.graph.m).keys()].find((e) => b.graph.src[e] === x);
  const addmm = b.graph.dst[fed];
  const status = data.status[1].slice();
  status[addmm] = STATUSES.indexOf("changed");
  const closed = marksOf(1, [], status);
  const into = `n${x}>${closed.tree.rep(addmm)}`;
  assert.ok(closed.tree.rep(addmm).startsWith("g"));
  assert.equal(closed.marks.get(into), "gv-cmp-edge-changed");
  // On a line that also stands for an edge only bf16 has, that edge wins over a changed end.
  const only = data.edges[1][0];
  status[b.graph.src[only]] = STATUSES.indexOf("changed");
  const both = marksOf(1, [], status);
  assert.equal(both.marks.get(`${both.tree.rep(b.graph.src[only])}>${both.tree.rep(b.graph.dst[only])}`), "gv-cmp-edge-added");
  // Every box on the way open: the AddmmBackward0 is drawn (and outlined itself); its line is not marked.
  const { tree } = marksOf(1, []);
  tree.reveal(addmm);
  const open = marksOf(1, [...tree.open], status);
  assert.equal(open.tree.rep(addmm), "n" + addmm);
  assert.equal(open.marks.get(`n${x}>n${addmm}`), undefined);
  // Unchanged, closed: nothing to mark on that line.
  assert.equal(marksOf(1, []).marks.get(into), undefined);
});

test("an attribute change reads as the attribute and its two values", () => {
  const data = checkCompare(raw());
  const i = data.status[1].indexOf(STATUSES.indexOf("changed"));
  data.changes[1][String(i)] = [["exponent", "2", "3"]];
  assert.deepEqual(compareRows(data, 1, i, () => "PowBackward0")[1], ["exponent changed", "2 → 3"]);
});
