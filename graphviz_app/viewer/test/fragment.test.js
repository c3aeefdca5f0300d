// @ts-check
import assert from "node:assert/strict";
import { test } from "node:test";
import { readFragment, writeFragment } from "../src/fragment.js";
import { boxNamed, loaded, nodeNamed } from "./support.js";

test("a view written to the fragment reads back as the same view", () => {
  const { graph, tree } = loaded("modules");
  const roll = boxNamed(tree, "blocks.0–2: Block ×3");
  tree.revealGroup(roll);
  tree.setInstance(roll, 2);
  const sel = nodeNamed(graph, "SumBackward0");
  const hash = writeFragment(tree, graph, { sel, color: "gradient" });
  const view = readFragment(hash, tree, graph, ["gradient", "memory"]);
  assert.deepEqual(view.open, [...tree.open].sort((a, b) => a - b));
  assert.equal(view.inst.get(roll), 2);
  assert.equal(view.sel, sel);
  assert.equal(view.color, "gradient");
});

test("boxes, nodes and colourings the graph does not have are left out", () => {
  const { graph, tree } = loaded("modules");
  const view = readFragment("#open=0.999.x.1&inst=1:7.2:0&sel=n999&color=latency", tree, graph, ["gradient"]);
  assert.deepEqual(view.open, [0, 1]);
  assert.deepEqual([...view.inst], [[2, 0]]);
  assert.equal(view.sel, null);
  assert.equal(view.color, null);
});

test("modules named by hand are opened by name; a long query is cut", () => {
  const { graph, tree } = loaded("modules");
  const view = readFragment(`#expand=blocks.1.fc,nothing&q=${"x".repeat(500)}`, tree, graph, []);
  assert.deepEqual(view.expand, [boxNamed(tree, "blocks.1.fc: Linear")]);
  assert.equal(view.query.length, 200);
});
