// @ts-check
import assert from "node:assert/strict";
import { test } from "node:test";
import { boxNamed, loaded, nodeNamed } from "./support.js";

test("closed, the graph shows its output, its input and its top modules, joined once per pair", () => {
  const { tree } = loaded("modules");
  const head = boxNamed(tree, "head: Head"), blocks = boxNamed(tree, "blocks: ModuleList");
  assert.deepEqual(tree.items(0).sort(), ["g" + blocks, "g" + head, "n0", "n14"].sort());
  const pairs = tree.edges(0).map(([a, b]) => a + ">" + b);
  assert.deepEqual(pairs.sort(), [`g${blocks}>g${head}`, `g${head}>n0`, `n14>g${blocks}`].sort());
});

test("a node inside a closed box is drawn as that box; opening the boxes on its path shows it", () => {
  const { graph, tree } = loaded("modules");
  const weight = nodeNamed(graph, "blocks.0.fc.weight");
  const blocks = boxNamed(tree, "blocks: ModuleList");
  assert.equal(tree.rep(weight), "g" + blocks);
  tree.reveal(weight);
  assert.equal(tree.rep(weight), "n" + weight);
  assert.ok(tree.path(weight).every((g) => tree.open.has(g)));
});

test("a roll shows one instance at a time, and the instance wraps around", () => {
  const { graph, tree } = loaded("modules");
  const roll = boxNamed(tree, "blocks.0–2: Block ×3");
  assert.equal(tree.count[roll], 3);
  tree.revealGroup(roll);
  const shown = () => tree.items(roll).map((k) => tree.label[+k.slice(1)]);
  assert.deepEqual(shown(), ["blocks.0: Block"]);
  tree.setInstance(roll, 4);
  assert.deepEqual(shown(), ["blocks.1: Block"]);
  tree.setInstance(roll, -1);
  assert.deepEqual(shown(), ["blocks.2: Block"]);
  // a node of another instance is drawn as the roll showing this one
  assert.equal(tree.rep(nodeNamed(graph, "blocks.0.fc.weight")), "g" + roll);
});

test("closing a box closes every box inside it; the graph itself never closes", () => {
  const { tree } = loaded("modules");
  const fc = boxNamed(tree, "blocks.0.fc: Linear"), blocks = boxNamed(tree, "blocks: ModuleList");
  tree.revealGroup(fc);
  assert.ok(tree.open.has(fc));
  tree.toggle(blocks);
  assert.ok(!tree.open.has(blocks) && !tree.open.has(fc));
  tree.toggle(0);
  assert.ok(tree.open.has(0));
  assert.deepEqual(tree.openVisible(), [0]);
});

test("a folded run of 400 ops counts its repeats and keeps each instance's edges apart", () => {
  const { graph, tree } = loaded("chain");
  assert.equal(tree.count[1], 200);
  assert.equal(tree.ops[1], 400);
  tree.toggle(1);
  const drawn = tree.items(1).filter((k) => k[0] === "n" && graph.kind(+k.slice(1)) === "op");
  assert.deepEqual(drawn.map((k) => graph.name(+k.slice(1))).sort(), ["MulBackward0", "SinBackward0"]);
  assert.ok(tree.edgeList(1).length < 10, `an instance draws ${tree.edgeList(1).length} edges`);
});
