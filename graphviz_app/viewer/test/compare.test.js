// @ts-check
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { HOLDS, STATUSES, boxHolds, checkCompare, compareRows, edgeNames, holdsClass, matchBoxes, summaryText } from "../src/compare.js";
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

test("the edges only one graph has are named as the drawing names them", () => {
  const { data, a, b } = loadedPair();
  const removed = edgeNames(data.edges[0], a.graph), added = edgeNames(data.edges[1], b.graph);
  assert.ok([...removed, ...added].every((name) => /^n\d+>n\d+$/.test(name)));
  // blocks.2's weight feeds its AddmmBackward0 in fp32 only.
  const weight = [...Array(a.graph.n).keys()].find((i) => a.graph.name(i) === "blocks.2.fc.weight");
  assert.ok([...removed].some((name) => name.startsWith(a.graph.id(weight) + ">")));
  // bf16 has no node fp32 lacks; its new edge joins blocks.1's act to the head, which fed on blocks.2 before.
  assert.ok(!data.match[1].includes(-1));
  const head = [...Array(b.graph.n).keys()].find((i) => b.graph.module(i) === "head");
  assert.ok([...added].some((name) => name.endsWith(">" + b.graph.id(head))), [...added].join(", "));
});
