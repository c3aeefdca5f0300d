// @ts-check
import assert from "node:assert/strict";
import { test } from "node:test";
import { placeMarks } from "../src/ticks.js";

/**
 * No two marks of one row closer than `gap`: each is seen and hovered on its own.
 * @param {import("../src/ticks.js").MarkPlace[]} places
 * @param {number} gap
 */
function apart(places, gap) {
  for (let a = 0; a < places.length; a++) {
    for (let b = a + 1; b < places.length; b++) {
      if (places[a].row === places[b].row) assert.ok(Math.abs(places[a].x - places[b].x) >= gap, `${a} and ${b} meet`);
    }
  }
}

test("marks at different steps stay on one row, each at its own step's x", () => {
  const { places, rows } = placeMarks([10, 30, 50], 8, 4);
  assert.equal(rows, 1);
  assert.deepEqual(places, [{ row: 0, x: 10 }, { row: 0, x: 30 }, { row: 0, x: 50 }]);
});

test("marks issued while one node runs are stacked in rows at that node's x", () => {
  // FSDP2 at one backward node: the unit's reduce-scatter and the next unit's all-gather
  const { places, rows } = placeMarks([10, 40, 40, 40, 70], 8, 4);
  assert.equal(rows, 3);
  assert.deepEqual(places.slice(1, 4), [{ row: 0, x: 40 }, { row: 1, x: 40 }, { row: 2, x: 40 }]);
  assert.deepEqual(places[4], { row: 0, x: 70 });
  apart(places, 8);
});

test("past the last row, marks of one step fan out to the right, in order, still apart", () => {
  const xs = Array(7).fill(20);
  const { places, rows } = placeMarks(xs, 8, 3);
  assert.equal(rows, 3);
  assert.deepEqual(places.map((p) => p.row), [0, 1, 2, 0, 1, 2, 0]);
  assert.deepEqual(places.map((p) => p.x), [20, 20, 20, 28, 28, 28, 36]);
  apart(places, 8);
});

test("neighbouring steps closer than a mark's width do not overlap either", () => {
  // a 900-step backward on a 600-pixel chart: several steps per pixel column
  const xs = [100, 101, 101.5, 103, 200];
  const { places } = placeMarks(xs, 8, 2);
  apart(places, 8);
  for (let j = 1; j < places.length; j++) {
    const same = places.filter((p, k) => k < j && p.row === places[j].row);
    if (same.length) assert.ok(places[j].x > same[same.length - 1].x);  // order kept within a row
  }
});

test("no marks, no rows; a row count below one is taken as one", () => {
  assert.deepEqual(placeMarks([], 8, 4), { places: [], rows: 0 });
  assert.deepEqual(placeMarks([5, 5], 8, 0).places, [{ row: 0, x: 5 }, { row: 0, x: 13 }]);
});
