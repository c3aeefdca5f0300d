// @ts-check
import assert from "node:assert/strict";
import { test } from "node:test";
import { GraphData } from "../src/graph.js";
import { columns, moduleRows, ordered, tiedParameters } from "../src/table.js";
import { Tree } from "../src/tree.js";
import { boxNamed, fixture, loaded, nodeNamed } from "./support.js";

test("one row per module, a roll as one row with its instances' parameters, children under parents", () => {
  const { data, graph, tree } = loaded("modules");
  const table = moduleRows(graph, tree, data.overlays);
  const names = ordered(table, null, false).map((g) => table.rows.get(g).name);
  assert.deepEqual(names, ["head", "blocks", "blocks.0–2: Block ×3"]);
  assert.deepEqual(ordered(table, null, false), ordered(table, null, false), "ordering leaves the table as it was");
  const roll = table.rows.get(boxNamed(tree, "blocks.0–2: Block ×3"));
  assert.equal(roll.depth, 1);
  assert.equal(roll.params, 96);
  assert.equal(roll.ops, 6);
  assert.equal(roll.dtype, "float32");
  assert.equal(roll.device, "cpu");
  assert.equal(roll.values.memory, 96);
});

test("the columns: the built-in colourings then your own, named for a person", () => {
  const { data } = loaded("modules");
  const labels = columns([...data.overlays, { key: "user:latency", label: "latency", node: [] }]).map((c) => c.label);
  assert.deepEqual(labels, ["module", "type", "parameters", "ops", "saved bytes", "bytes at the peak", "gradient norm",
    "latency", "dtype", "device", "tied parameters"]);
});

test("sorting orders siblings only: a child stays under its parent", () => {
  const { data, graph, tree } = loaded("modules");
  const table = moduleRows(graph, tree, data.overlays);
  const ops = columns(data.overlays).find((c) => c.key === "ops");
  const down = ordered(table, ops, true).map((g) => table.rows.get(g).name);
  assert.deepEqual(down, ["blocks", "blocks.0–2: Block ×3", "head"]);
  const up = ordered(table, ops, false).map((g) => table.rows.get(g).name);
  assert.deepEqual(up, ["head", "blocks", "blocks.0–2: Block ×3"]);
});

test("a graph without modules has no rows", () => {
  const { data, graph, tree } = loaded("chain");
  assert.equal(moduleRows(graph, tree, data.overlays).rows.size, 0);
});

test("a parameter of one module used by another's ops is named as tied in the user's row", () => {
  const data = fixture("modules");
  const graph = new GraphData(data.graph);
  assert.equal(tiedParameters(graph).size, 0, "each block uses its own weight");
  // GPT-2's tying: the head's op uses blocks.0.fc.weight
  const weight = nodeNamed(graph, "blocks.0.fc.weight"), sum = nodeNamed(graph, "SumBackward0");
  /** @type {number[]} */ (data.graph.edges.src).push(weight);
  /** @type {number[]} */ (data.graph.edges.dst).push(sum);
  const tied = tiedParameters(new GraphData(data.graph));
  assert.deepEqual([...tied.get("head")], ["blocks.0.fc.weight"]);
});

test("a checked graph's table has a check column in words; sorting by it puts the culprit first", () => {
  const { data, graph, tree } = loaded("checked");
  const cols = columns(data.overlays);
  const check = cols.find((c) => c.key === "check");
  assert.ok(check, "a check column");
  assert.equal(check.label, "check");
  assert.equal(cols.filter((c) => c.key === "check").length, 1, "one column, not one per colouring");
  const table = moduleRows(graph, tree, data.overlays);
  const shown = (/** @type {string} */ name) => check.text(table.rows.get(boxNamed(tree, name)));
  assert.equal(shown("head: Head"), "passed");
  assert.equal(shown("blocks: ModuleList"), "culprit inside", "a module never called shows the worst inside it");
  assert.equal(shown("blocks.0–2: Block ×3"), "culprit inside", "a roll shows the worst of its instances");
  const byRow = ordered(table, check, true).map((g) => table.rows.get(g).name);
  assert.deepEqual(byRow, ["blocks", "blocks.0–2: Block ×3", "head"], "worst first among siblings");
  assert.deepEqual(ordered(table, check, false).map((g) => table.rows.get(g).name),
    ["head", "blocks", "blocks.0–2: Block ×3"]);
});

test("the check column shows a verdict per module and a dash where the graph holds none", () => {
  const data = fixture("checked");
  for (const o of data.overlays) if (o.key === "check") o.text[boxNamed(new Tree(data.tree, new GraphData(data.graph)), "head: Head")] = null;
  const graph = new GraphData(data.graph);
  const tree = new Tree(data.tree, graph);
  const table = moduleRows(graph, tree, data.overlays);
  const check = columns(data.overlays).find((c) => c.key === "check");
  assert.equal(check.text(table.rows.get(boxNamed(tree, "head: Head"))), "—");
  const plain = loaded("modules");
  assert.equal(columns(plain.data.overlays).find((c) => c.key === "check"), undefined, "no check: no column");
});

test("unrolled, each module of a checked graph shows its own verdict, the culprit with its size, input and line", () => {
  const { data, graph, tree } = loaded("checked");
  const o = data.overlays.find((x) => x.key === "check");
  const words = (/** @type {string} */ label) => o.text[boxNamed(tree, label)];
  assert.equal(words("blocks.1.fc: Linear"), "culprit: 1.02 x (input input), model.py:11");
  assert.equal(words("blocks.1: Block"), "fails inside (blocks.1.fc)");
  assert.equal(words("blocks.2: Block"), "not checked");
  assert.deepEqual(o.flag.map((i) => graph.name(i)), ["AddmmBackward0"]);
});
