// @ts-check
import assert from "node:assert/strict";
import { test } from "node:test";
import { gzipSync } from "node:zlib";
import { checkPayload, decodePayload } from "../src/decode.js";
import { fixture } from "./support.js";

/** base64 of gzipped `text`, as payload.encode() writes it. @param {string} text */
const encode = (text) => gzipSync(Buffer.from(text, "utf8")).toString("base64");

test("a payload the Python side made decodes to the same object", async () => {
  const data = fixture("modules");
  const back = await decodePayload(encode(JSON.stringify(data)));
  assert.deepEqual(back, data);
  assert.equal(back.graph.nodes.kind.length, back.tree.node_group.length);
});

test("damaged data says what is wrong and what to do", async () => {
  await assert.rejects(decodePayload("  "), /no graph data/);
  await assert.rejects(decodePayload("%%%"), /not base64/);
  await assert.rejects(decodePayload(Buffer.from("plain").toString("base64")), /not gzip/);
  await assert.rejects(decodePayload(encode("{not json")), /\(not JSON\): save the graph again/);
  await assert.rejects(decodePayload(encode('{"format": "other"}')), /not graphviz-app viewer data/);
});

test("a payload of another version names the versions this viewer reads", () => {
  const data = { ...fixture("modules"), version: 3 };
  assert.throws(() => checkPayload(data), /viewer version 3; this viewer reads versions 1 and 2/);
});

test("a payload with packed columns (version 2) is read like a plain one (version 1)", () => {
  assert.doesNotThrow(() => checkPayload({ ...fixture("modules"), version: 2 }));
});

test("boxes that do not match the nodes, and edges to nodes that do not exist, are refused", () => {
  const short = fixture("modules");
  /** @type {number[]} */ (short.tree.node_group).pop();
  assert.throws(() => checkPayload(short), /boxes do not match its nodes/);
  const noLabels = fixture("modules");
  noLabels.tree.label = noLabels.tree.label.slice(1);
  assert.throws(() => checkPayload(noLabels), /boxes lack their label/);
  const wild = fixture("modules");
  wild.graph.edges.dst[0] = wild.graph.nodes.kind.length;
  assert.throws(() => checkPayload(wild), /edge 0 joins nodes/);
});

test("where the browser has Uint8Array.fromBase64 it reads the base64, and damage is still named", async () => {
  const holder = /** @type {{fromBase64?: (text: string) => Uint8Array}} */ (/** @type {unknown} */ (Uint8Array));
  const had = Object.prototype.hasOwnProperty.call(holder, "fromBase64");
  const original = holder.fromBase64;
  let calls = 0;
  holder.fromBase64 = (text) => {
    calls += 1;
    if (!/^[A-Za-z0-9+/=]*$/.test(text)) throw new SyntaxError("bad base64");
    return new Uint8Array(Buffer.from(text, "base64"));
  };
  try {
    const data = fixture("modules");
    assert.deepEqual(await decodePayload(encode(JSON.stringify(data))), data);
    assert.equal(calls, 1);
    await assert.rejects(decodePayload("%%%"), /not base64/);
  } finally {
    if (had) holder.fromBase64 = original;
    else delete holder.fromBase64;
  }
});
