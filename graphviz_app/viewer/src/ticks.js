// @ts-check
// Where the memory chart puts its collective marks: each one visible and hoverable on its own, also when
// several are issued while one node runs (FSDP2's reduce-scatter of a unit and the prefetching all-gather
// of the next; the forward's all-gathers, all at step 0). Pure: x positions in, rows and x positions out.

/**
 * A mark's place: `row` 0 is just under the axis, each next row one band lower; `x` where it is drawn
 * (the step's own x, or moved right of the marks before it once every row is taken there).
 * @typedef {object} MarkPlace
 * @property {number} row
 * @property {number} x
 */

/**
 * Lay out marks wanted at `xs` (pixels) so that no two of one row are closer than `gap`: a mark takes the
 * first row free at its x; with all `maxRows` rows taken there, it goes to the row freed soonest, moved
 * right just enough (fanned). Marks keep their order: in each row, x grows with the index.
 *
 * @param {number[]} xs  where each mark would be drawn, in the order the marks were issued
 * @param {number} gap  the least distance between the centres of two marks of one row (its hit width)
 * @param {number} maxRows  the most rows (at least 1)
 * @returns {{places: MarkPlace[], rows: number}}  one place per mark, and how many rows are used
 */
export function placeMarks(xs, gap, maxRows) {
  const limit = Math.max(1, Math.floor(maxRows));
  /** The x of the last mark put in each row. @type {number[]} */
  const last = [];
  /** @type {MarkPlace[]} */
  const places = [];
  for (const x of xs) {
    let row = last.findIndex((end) => end + gap <= x);
    if (row < 0 && last.length < limit) row = last.length;
    let at = x;
    if (row < 0) {  // every row is taken here: the row freed soonest, moved right past its last mark
      row = 0;
      for (let r = 1; r < last.length; r++) if (last[r] < last[row]) row = r;
      at = last[row] + gap;
    }
    last[row] = at;
    places.push({ row, x: at });
  }
  return { places, rows: last.length };
}
