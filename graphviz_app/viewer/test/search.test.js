// @ts-check
import assert from "node:assert/strict";
import { test } from "node:test";
import { Search } from "../src/search.js";
import { loaded } from "./support.js";

test("search finds ops by name in any case, ops before tensors, in node order", () => {
  const { graph } = loaded("modules");
  const found = new Search(graph).find("  addmm ");
  assert.equal(found.length, 3);
  assert.ok(found.every((i) => graph.name(i) === "AddmmBackward0"));
  assert.deepEqual(found, [...found].sort((a, b) => a - b));
  const fc = new Search(graph).find("blocks.0.fc");
  assert.equal(graph.kind(fc[0]), "op");
  assert.ok(fc.some((i) => graph.kind(i) === "leaf"));
});

test("search reaches modules, shapes, dtypes and source lines; an empty query finds nothing", () => {
  const { graph } = loaded("modules");
  const search = new Search(graph);
  assert.ok(search.find("(2, 4) float32").length > 0);
  assert.ok(search.find("model.py:30").every((i) => graph.name(i) === "SumBackward0"));
  assert.deepEqual(search.find("   "), []);
  assert.equal(search.find("backward", 2).length, 2);
});

test("a name holding markup is matched as the text it is", () => {
  const { graph } = loaded("hostile");
  const found = new Search(graph).find("<img src=x onerror");
  assert.ok(found.length >= 1);
  assert.ok(graph.name(found[0]).startsWith("<img src=x onerror="));
});

test("texts made in slices find what texts made at once find", () => {
  const { graph } = loaded("chain");
  const sliced = new Search(graph);
  let slices = 1;
  while (!sliced.indexSome(0)) slices++;
  assert.ok(slices > 1, "a slice of 0 ms stops after 256 nodes");
  const half = new Search(graph);
  half.indexSome(0);
  for (const q of ["sinbackward0", "n401", "(4,)", "x"]) {
    assert.deepEqual(sliced.find(q), new Search(graph).find(q), q);
    assert.deepEqual(half.find(q), new Search(graph).find(q), q);  // find() makes the rest first
  }
});
