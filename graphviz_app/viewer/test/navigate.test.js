// @ts-check
import assert from "node:assert/strict";
import { test } from "node:test";
import { moveFrom, moveOf } from "../src/navigate.js";

/** @param {number} x @param {number} y */
const box = (x, y) => ({ x, y, w: 40, h: 20, open: false });
// a and b feed c; c feeds d and e (top to bottom: a b / c / d e)
const boxes = new Map([["g0", { x: 0, y: 0, w: 300, h: 300, open: true }], ["a", box(0, 0)], ["b", box(100, 0)],
  ["c", box(50, 100)], ["d", box(0, 200)], ["e", box(100, 200)]]);
/** @type {[string, string][]} */
const pairs = [["a", "c"], ["b", "c"], ["c", "d"], ["c", "e"]];

test("arrow keys follow the flow's direction", () => {
  assert.equal(moveOf("ArrowUp", "TB"), "input");
  assert.equal(moveOf("ArrowDown", "BT"), "input");
  assert.equal(moveOf("ArrowLeft", "LR"), "input");
  assert.equal(moveOf("ArrowRight", "RL"), "input");
  assert.equal(moveOf("x", "TB"), null);
});

test("up goes to the nearest input, down to the nearest consumer, sideways to a sibling", () => {
  assert.equal(moveFrom("c", "input", pairs, boxes, "TB"), "a");  // a and b are as near: the first
  assert.equal(moveFrom("d", "input", pairs, boxes, "TB"), "c");
  assert.equal(moveFrom("c", "consumer", pairs, boxes, "TB"), "d");
  assert.equal(moveFrom("a", "after", pairs, boxes, "TB"), "b");
  assert.equal(moveFrom("b", "before", pairs, boxes, "TB"), "a");
  assert.equal(moveFrom("e", "before", pairs, boxes, "TB"), "d");
  assert.equal(moveFrom("a", "input", pairs, boxes, "TB"), null);
  assert.equal(moveFrom("b", "after", pairs, boxes, "TB"), null);
});

test("with no sibling that way, the move goes to the nearest box beside it in its rank", () => {
  const more = new Map([...boxes, ["f", box(200, 100)]]);
  assert.equal(moveFrom("c", "after", pairs, more, "TB"), "f");
  assert.equal(moveFrom("nowhere", "after", pairs, more, "TB"), null);
});
