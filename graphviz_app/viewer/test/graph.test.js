// @ts-check
import assert from "node:assert/strict";
import { test } from "node:test";
import { GraphData } from "../src/graph.js";
import { fixture, loaded, nodeNamed } from "./support.js";

test("node fields come from the columns and the string table", () => {
  const { graph } = loaded("modules");
  const fc = nodeNamed(graph, "AddmmBackward0");
  assert.equal(graph.kind(fc), "op");
  assert.match(graph.module(fc), /^blocks\.\d\.fc$/);
  assert.equal(graph.shapeText(fc), "(2, 4)");
  assert.equal(graph.tensor(fc).dtype, "float32");
  assert.equal(graph.indexOf(graph.id(fc)), fc);
  assert.equal(graph.indexOf("no such id"), -1);
  assert.deepEqual(graph.outputs(), [0]);
  assert.equal(graph.modules.get("blocks").type, "ModuleList");
});

test("non-finite statistics, carried as text in JSON, read back as numbers", () => {
  const data = fixture("modules");
  data.graph.grads.norm[0] = "nan";
  data.graph.grads.max_abs[0] = "inf";
  data.graph.grads.mean_abs[0] = "-inf";
  const graph = new GraphData(data.graph);
  const i = data.graph.nodes.grad.indexOf(0);
  const g = graph.grad(i);
  assert.ok(Number.isNaN(g.norm));
  assert.equal(g.maxAbs, Infinity);
  assert.equal(g.meanAbs, -Infinity);
});

test("edge kinds are named; the graph says which op first went non-finite, or -1", () => {
  const { graph } = loaded("modules");
  const kinds = new Set(Array.from({ length: graph.m }, (_, e) => graph.edgeKind(e)));
  assert.deepEqual([...kinds].sort(), ["data", "saved"]);
  assert.equal(graph.origin(), -1);
});

test("a node's index is read from an id n0, n1, ... and only from exactly such an id", () => {
  const { graph } = loaded("chain");
  assert.equal(graph.g.nodes.id, null, "the chain's ids are n0, n1, ...");
  assert.equal(graph.indexOf("n0"), 0);
  assert.equal(graph.indexOf(`n${graph.n - 1}`), graph.n - 1);
  for (const id of [`n${graph.n}`, "n01", "n", "n-1", "n1.0", " n1", "n1e2", "x", ""]) assert.equal(graph.indexOf(id), -1, id);
});
