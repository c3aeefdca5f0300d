// @ts-check
import assert from "node:assert/strict";
import { test } from "node:test";
import { MAX_TRIES, moduleLevels, pickOpen } from "../src/opening.js";
import { boxNamed, loaded } from "./support.js";

test("only modules holding boxes open: a module of ops alone and a roll stay one box", () => {
  const { tree } = loaded("modules");
  assert.deepEqual(moduleLevels(tree), [[boxNamed(tree, "blocks: ModuleList")]]);
  assert.deepEqual(moduleLevels(loaded("chain").tree), [], "no modules: the graph with its fold closed");
});

test("whole levels open while they fit, then what fits of the next one, box by box", () => {
  const levels = [[1, 2], [3, 4, 5], [6]];
  const bigger = new Set([4]);  // opening box 4 makes the drawing too big
  const picked = pickOpen(levels, (open) => !open.some((g) => bigger.has(g)));
  assert.deepEqual(picked, { open: [0, 1, 2, 3, 5], fits: true });
  assert.deepEqual(pickOpen(levels, () => true).open, [0, 1, 2, 3, 4, 5, 6]);
});

test("when even the closed graph does not fit, it says so and opens nothing", () => {
  const tried = [];
  const picked = pickOpen([[1]], (open) => { tried.push(open); return false; });
  assert.deepEqual(picked, { open: [0], fits: false });
  assert.equal(tried.length, 1);
});

test("a wide level is tried box by box only up to MAX_TRIES", () => {
  const wide = Array.from({ length: 100 }, (_, k) => k + 1);
  let tries = 0;
  const picked = pickOpen([wide], (open) => { tries += 1; return open.length <= 3; });
  assert.equal(tries, 2 + MAX_TRIES);  // the graph, the whole level, then MAX_TRIES boxes
  assert.deepEqual(picked.open, [0, 1, 2]);
});
