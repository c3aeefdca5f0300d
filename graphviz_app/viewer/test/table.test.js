// @ts-check
import assert from "node:assert/strict";
import { test } from "node:test";
import { columns, moduleRows, ordered } from "../src/table.js";
import { boxNamed, loaded } from "./support.js";

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
    "latency", "dtype", "device"]);
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
