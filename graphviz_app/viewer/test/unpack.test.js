// @ts-check
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { checkPayload } from "../src/decode.js";
import { GraphData } from "../src/graph.js";
import { Tree } from "../src/tree.js";
import { Rows, row, unpackAll, unpackColumn } from "../src/unpack.js";

/** @param {string} name @returns {any} */
const raw = (name) => JSON.parse(readFileSync(new URL(`./fixtures/${name}.json`, import.meta.url), "utf8"));

/** Everything the viewer reads of a node, an edge and a box, as plain values. @param {any} data */
function readings(data) {
  const graph = new GraphData(data.graph);
  const tree = new Tree(data.tree, graph);
  const plain = (/** @type {any} */ v) => (v && typeof v === "object" && "length" in v ? Array.from(v) : v);
  const nodes = [];
  for (let i = 0; i < graph.n; i++) {
    const t = graph.tensor(i), g = graph.grad(i);
    nodes.push({ id: graph.id(i), kind: graph.kind(i), name: graph.name(i), module: graph.module(i), source: graph.source(i),
      recency: graph.recency(i), attrs: graph.attrs(i), shape: graph.shapeText(i),
      tensor: t && { ...t, shape: plain(t.shape), values: plain(t.values) }, grad: g && { ...g, values: plain(g.values) },
      group: tree.nodeGroup[i], instance: tree.nodeInstance[i] });
  }
  const edges = [];
  for (let e = 0; e < graph.m; e++) edges.push([graph.src[e], graph.dst[e], graph.edgeKind(e), graph.edgeGrad(e)]);
  const overlays = (data.overlays || []).map((/** @type {any} */ o) => [o.key, plain(o.node), plain(o.group)]);
  return { nodes, edges, overlays, parent: plain(tree.parent), size: plain(tree.size), outputs: graph.outputs() };
}

for (const name of ["modules", "chain"]) {
  test(`the ${name} payload with every column packed reads as the same graph, boxes and colourings`, () => {
    const packed = raw(`${name}_packed`);
    assert.ok(packed.graph.edges.src.$packed, "the fixture's columns are packed");
    const data = checkPayload(unpackAll(packed));
    assert.ok(ArrayBuffer.isView(data.graph.edges.src), "an index column is a typed array");
    assert.deepEqual(readings(data), readings(checkPayload(raw(name))));
  });
}

test("each packed form reads back as the entries it stands for", () => {
  const b64 = (/** @type {number[]} */ bytes) => Buffer.from(bytes).toString("base64");
  assert.deepEqual(Array.from(/** @type {Int32Array} */ (unpackColumn({ $packed: "const", n: 3, value: -1 }))), [-1, -1, -1]);
  assert.deepEqual(unpackColumn({ $packed: "const", n: 2, value: null }), [null, null]);
  assert.deepEqual(Array.from(/** @type {Int32Array} */ (unpackColumn({ $packed: "range", n: 4, start: 7, step: -2 }))), [7, 5, 3, 1]);
  const steps = unpackColumn({ $packed: "int", n: 4, type: "i8", data: b64([0, 1, 255, 3]), start: 100 });
  assert.deepEqual(Array.from(/** @type {Int32Array} */ (steps)), [100, 101, 100, 103]);
  // 2-bit values 3, 4, 6, 5 from min 3: plane 0 holds 0,1,1,0 (bits 1,2: 0b0110), plane 1 holds 0,0,1,1 (0b1100)
  const planes = unpackColumn({ $packed: "int", n: 4, type: "bits", width: 2, min: 3, data: b64([0b0110, 0b1100]) });
  assert.deepEqual(Array.from(/** @type {Int32Array} */ (planes)), [3, 4, 6, 5]);
  const wide = unpackColumn({ $packed: "int", n: 2, type: "i16", data: b64([0x10, 0x27, 0xff, 0xff]) });
  assert.deepEqual(Array.from(/** @type {Int16Array} */ (wide)), [10000, -1]);
  const some = unpackColumn({ $packed: "nullable", n: 4, none: null, present: { $packed: "int", n: 4, type: "i8", data: b64([0, 1, 1, 0]) },
    values: { $packed: "range", n: 2, start: 5, step: 1 } });
  assert.deepEqual(some, [null, 5, 6, null]);
  const lists = unpackColumn({ $packed: "nullable", n: 3, none: 0, present: { $packed: "int", n: 3, type: "i8", data: b64([1, 0, 1]) },
    values: { $packed: "rows", n: 2, lengths: { $packed: "int", n: 2, type: "i8", data: b64([2, 1]) }, flat: [4, 5, 6] } });
  assert.ok(lists instanceof Rows);
  assert.deepEqual([0, 1, 2].map((i) => row(lists, i)), [[4, 5], 0, [6]]);
});

test("a damaged or unknown packed column is refused with what to do", () => {
  const b64 = Buffer.from([1, 2, 3]).toString("base64");
  assert.throws(() => unpackColumn({ $packed: "int", n: 2, type: "i16", data: b64 }), /damaged .*save the graph again/);
  assert.throws(() => unpackColumn({ $packed: "int", n: 3, type: "u64", data: b64 }), /damaged/);
  assert.throws(() => unpackColumn({ $packed: "int", type: "i8", data: b64 }), /without its length/);
  assert.throws(() => unpackColumn({ $packed: "int", n: 30, type: "bits", width: 1, min: 0, data: b64 }), /damaged/);
  assert.throws(() => unpackColumn({ $packed: "int", n: 8, type: "bits", width: 3, min: 0, data: b64 }), /damaged/);
  assert.throws(() => unpackColumn({ $packed: "zip", n: 3 }), /packed as "zip", which this viewer does not read/);
  assert.throws(() => unpackColumn({ $packed: "int", n: 3, type: "i8", data: "%%%" }), /not base64/);
});
