// @ts-check
import assert from "node:assert/strict";
import { test } from "node:test";
import { MAX_PIXELS, MAX_SIDE, fileName, pngRatio } from "../src/picture.js";

test("a picture's file name keeps letters, digits, dots and dashes of the title", () => {
  assert.equal(fileName("GPT-2 small: loss", "svg"), "GPT-2_small_loss.svg");
  assert.equal(fileName("../../etc/passwd", "png"), "etc_passwd.png");
  assert.equal(fileName("<script>", "view.svg"), "script.view.svg");
  assert.equal(fileName("", "svg"), "graph.svg");
});

test("a PNG is drawn at the asked ratio unless the canvas would be too big", () => {
  assert.equal(pngRatio(800, 600, 2), 2);
  const r = pngRatio(40000, 1000, 2);
  assert.ok(40000 * r <= MAX_SIDE);
  const big = pngRatio(12000, 12000, 2);
  assert.ok(12000 * big * 12000 * big <= MAX_PIXELS + 1);
});
