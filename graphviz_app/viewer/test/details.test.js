// @ts-check
import assert from "node:assert/strict";
import { test } from "node:test";
import { groupRows, nodeRows } from "../src/details.js";
import { boxNamed, loaded, nodeNamed } from "./support.js";

test("a node's details say its kind, tensor, module with its type and parameters, source and gradient", () => {
  const { graph } = loaded("modules");
  const fc = nodeNamed(graph, "AddmmBackward0");
  const rows = new Map(nodeRows(graph, fc, () => [nodeNamed(graph, "mat1")]));
  assert.equal(rows.get("kind"), "backward op");
  assert.equal(rows.get("shape"), "(2, 4)");
  assert.match(rows.get("module"), /^blocks\.\d\.fc \(Linear\)$/);
  assert.equal(rows.get("module parameters"), "32 (128 B)");
  assert.equal(rows.get("saved"), "mat1: (2, 4) float32 32 B");
  assert.equal(rows.get("gradient norm"), "0.5");
});

test("a box's details count its ops and nodes and give its value in each overlay", () => {
  const { data, graph, tree } = loaded("modules");
  const roll = boxNamed(tree, "blocks.0–2: Block ×3");
  const rows = new Map(groupRows(graph, tree, roll, data.overlays));
  assert.equal(rows.get("kind"), "rolled repeats");
  assert.equal(rows.get("instances"), "3 (showing 1)");
  assert.equal(rows.get("ops"), "6");
  assert.equal(rows.get("largest gradient norm"), "0.5");
  assert.equal(rows.get("bytes saved for backward"), "96 B");
});

test("a rank's DTensor shows its layout, and a node lists the collectives it issued, names as text", async () => {
  const { chartEvents } = await import("../src/chart.js");
  const { collectiveRows } = await import("../src/details.js");
  const { data } = loaded("modules");
  const g = data.graph;
  const text = "Shard(dim=0) of (256, 64) on mesh (2)";
  g.strings.push(text);
  g.tensors.sharding = g.tensors.dtype.map(() => g.strings.length - 1);
  const graph = new (await import("../src/graph.js")).GraphData(g);
  const fc = nodeNamed(graph, "AddmmBackward0");
  assert.equal(new Map(nodeRows(graph, fc, () => [])).get("sharding"), text);
  const events = [{ op: "_allgather_base_", bytes: 132352, phase: "backward", step: 1, node: fc },
    { op: "<b>all_reduce</b>", bytes: 2048, phase: "forward", step: 0 }];
  assert.deepEqual(collectiveRows(events, fc), [["collective issued", "_allgather_base_ 129.3 KiB (backward)"]]);
  assert.deepEqual(collectiveRows(events, fc + 1), []);
  const series = { key: "live_bytes", values: [1, 2], events: [...events, { op: "x", bytes: 1, phase: "backward", step: 5 }] };
  assert.deepEqual(chartEvents(series).map((e) => e.op), ["_allgather_base_", "<b>all_reduce</b>"]);  // step 5 is off the chart
});

test("an overlay that gives words (a check's verdict) shows them, as text, for a box and for a node", async () => {
  const { overlayRows } = await import("../src/details.js");
  const { graph, tree } = loaded("modules");
  const roll = boxNamed(tree, "blocks.0–2: Block ×3");
  const fc = nodeNamed(graph, "AddmmBackward0");
  const words = "culprit <b>Fused</b>.backward: 1.02 x (x input), model.py:41";
  const node = Array.from({ length: graph.n }, () => /** @type {number | null} */ (null));
  node[fc] = 4;
  const nodeText = node.map((v) => (v === null ? null : words));
  const group = Array.from({ length: tree.kind.length }, () => /** @type {number | null} */ (null));
  group[roll] = 3;
  const text = group.map((v) => (v === null ? null : "fails inside (blocks.1)"));
  const check = { key: "check", label: "check: 0 passed, 4 culprit", node, group, text, node_text: nodeText };
  assert.equal(new Map(groupRows(graph, tree, roll, [check])).get("check"), "fails inside (blocks.1)");
  assert.deepEqual(overlayRows([check], fc), [["check", words]]);
  const plain = { key: "latency_ms", label: "latency (ms)", node: node.map((v) => (v === null ? null : 2.5)) };
  assert.deepEqual(overlayRows([plain], fc), [["latency (ms)", "2.5"]]);
  assert.deepEqual(overlayRows([check], fc === 0 ? 1 : 0), []);
});
