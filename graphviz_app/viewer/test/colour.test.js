// @ts-check
import assert from "node:assert/strict";
import { test } from "node:test";
import { FLAG, NO_VALUE, Scale, bytes, contrast, format, ramp, textOn } from "../src/colour.js";

test("the ramp runs from blue (low) to red (high) and clamps outside 0..1", () => {
  assert.equal(ramp(0), "#2c7bb6");
  assert.equal(ramp(1), "#d7191c");
  assert.equal(ramp(0.5), "#ffffbf");
  assert.equal(ramp(-3), ramp(0));
  assert.equal(ramp(7), ramp(1));
});

test("a log scale spans the overlay's positive values; none, zero and flagged nodes get their own colours", () => {
  const scale = new Scale({ key: "k", label: "k", scale: "log", unit: "bytes", node: [1024, 1048576, null, 0, 4096], flag: [4] });
  assert.equal(scale.node(0), ramp(0));
  assert.equal(scale.node(1), ramp(1));
  assert.equal(scale.node(2), NO_VALUE);
  assert.equal(scale.node(3), "#d0d0d0");
  assert.equal(scale.node(4), FLAG);
  assert.equal(scale.legend(), "1.0 KiB … 1.0 MiB");
});

test("a linear scale puts the middle value in the middle; one value alone sits mid-ramp", () => {
  const scale = new Scale({ key: "k", label: "k", scale: "linear", node: [0, 5, 10] });
  assert.equal(scale.node(1), ramp(0.5));
  assert.equal(new Scale({ key: "k", label: "k", node: [3] }).node(0), ramp(0.5));
  assert.equal(new Scale({ key: "k", label: "k", node: [null] }).legend(), "no values");
});

test("numbers read as a person writes them", () => {
  assert.equal(format(null), "—");
  assert.equal(format(0.5), "0.5");
  assert.equal(format(123456), "1.23e+5");
  assert.equal(format(0.0001), "1.00e-4");
  assert.equal(format(2048, "bytes"), "2.0 KiB");
  // not a number (a string from a saved file or an overlay, a flag): its text, never a TypeError
  assert.equal(format("12", "bytes"), "12");
  assert.equal(format("<b>x</b>"), "<b>x</b>");
  assert.equal(format(true), "true");
  assert.equal(bytes(512), "512 B");
  assert.equal(bytes(3 * 1024 ** 3), "3.0 GiB");
  assert.equal(bytes(32.00000000000001), "32 B");
});

test("contrast follows WCAG 2; the text colour chosen for any fill reads at 4.5:1 or better", () => {
  assert.equal(Math.round(contrast("#000000", "#ffffff")), 21);
  assert.equal(contrast("#777777", "#777777"), 1);
  for (let t = 0; t <= 1; t += 0.05) assert.ok(contrast(ramp(t), textOn(ramp(t))) >= 4.5, ramp(t));
  for (const fill of [NO_VALUE, FLAG, "#d0d0d0", "#2c7bb6", "#d7191c"]) assert.ok(contrast(fill, textOn(fill)) >= 4.5, fill);
  assert.equal(textOn("#ffffbf"), "#000000");
  assert.equal(textOn("#d7191c"), "#ffffff");
});
