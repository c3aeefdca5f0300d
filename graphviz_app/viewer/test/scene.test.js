// @ts-check
import assert from "node:assert/strict";
import { test } from "node:test";
import { instance } from "@viz-js/viz";
import { Layouts, dotText, readLayout } from "../src/layout.js";
import { buildScene, clip, groupLines, nodeLines } from "../src/scene.js";
import { boxNamed, loaded } from "./support.js";

/** @typedef {import("../src/types.js").Box} Box */

/** Whether box a lies inside box b. @param {Box} a @param {Box} b */
const inside = (a, b) => a.x >= b.x - 0.5 && a.y >= b.y - 0.5 && a.x + a.w <= b.x + b.w + 0.5 && a.y + a.h <= b.y + b.h + 0.5;
/** Whether boxes a and b overlap. @param {Box} a @param {Box} b */
const overlap = (a, b) => a.x < b.x + b.w - 0.5 && b.x < a.x + a.w - 0.5 && a.y < b.y + b.h - 0.5 && b.y < a.y + a.h - 0.5;

test("labels: a node's name, shape and dtype; a box's title and op count; long names cut", () => {
  const { graph, tree } = loaded("modules");
  assert.deepEqual(nodeLines(graph, 0), ["output", "() float32"]);
  assert.deepEqual(groupLines(tree, boxNamed(tree, "blocks.0–2: Block ×3")), ["blocks.0–2: Block ×3", "6 ops in all"]);
  assert.equal(clip("x".repeat(100)).length, 60);
});

test("Graphviz lays out the opened boxes: every item inside its open box, siblings apart, flow downwards", async () => {
  const { graph, tree } = loaded("modules");
  tree.revealGroup(boxNamed(tree, "blocks.0.fc: Linear"));
  const layouts = new Layouts(await instance(), "TB");
  const scene = buildScene(graph, tree, layouts);
  assert.equal(layouts.runs, scene.open.length, "each open box laid out once");
  for (const g of scene.open) {
    const outer = scene.boxes.get("g" + g), items = tree.items(g).map((k) => scene.boxes.get(k));
    for (const b of items) assert.ok(inside(b, outer), `an item of box ${g} is outside it`);
    for (let a = 0; a < items.length; a++) for (let b = a + 1; b < items.length; b++) assert.ok(!overlap(items[a], items[b]));
  }
  const x = scene.boxes.get("n14"), out = scene.boxes.get("n0");
  assert.ok(x.y < out.y, "the input is drawn above the output (data flows down)");
  assert.equal(scene.width, scene.boxes.get("g0").w);
});

test("a box's layout is reused until what is inside it changes", async () => {
  const { graph, tree } = loaded("modules");
  const layouts = new Layouts(await instance(), "TB");
  buildScene(graph, tree, layouts);
  const first = layouts.runs;
  buildScene(graph, tree, layouts);
  assert.equal(layouts.runs, first);
  tree.toggle(boxNamed(tree, "head: Head"));
  buildScene(graph, tree, layouts);
  assert.equal(layouts.runs, first + 2, "the opened box and the graph around it, nothing else");
});

test("the DOT text sizes nodes in inches and Graphviz's answer comes back in pixels, y downwards", async () => {
  const sizes = new Map([["n0", { w: 72, h: 36 }], ["n1", { w: 144, h: 36 }]]);
  /** @type {[string, string, number][]} */
  const edges = [["n1", "n0", 0]];
  const dot = dotText(["n0", "n1"], sizes, edges, "TB");
  assert.match(dot, /v0\[width=1\.000,height=0\.500\];v1\[width=2\.000,height=0\.500\];v1->v0;/);
  const viz = await instance();
  const out = viz.render(dot, { format: "json0" });
  assert.equal(out.status, "success");
  const res = readLayout(out.output, ["n0", "n1"]);
  assert.ok(res.pos.get("n1").y < res.pos.get("n0").y);
  const route = res.routes.get("n1>n0");
  assert.ok(route.points.length >= 4 && route.end !== null);
});
