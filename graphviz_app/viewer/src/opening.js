// @ts-check
// The opening view: the model's module structure, as deep as still fits the pane legibly.
// Only modules holding other boxes are opened (a module of ops alone, a rolled repeat, a folded run
// and a part stay one closed box each), a level of depth at a time; at the first level that does not
// fit whole, its boxes are tried one by one. A graph without modules opens on its folded runs.

/** @typedef {import("./tree.js").Tree} Tree */

// Boxes of the first level that does not fit whole tried one by one, at most: each try lays out that box
// and the boxes around it again, and the first view must stay quick on a wide model.
export const MAX_TRIES = 12;

/**
 * The module boxes that hold other boxes, by depth below the graph (levels[0]: depth 1), each
 * level's boxes in the order they are met; a box is listed only when the boxes around it are.
 * @param {Tree} tree
 * @returns {number[][]}
 */
export function moduleLevels(tree) {
  /** @type {number[][]} */
  const levels = [];
  let level = tree.children[0].filter((g) => structural(tree, g));
  while (level.length) {
    levels.push(level);
    level = level.flatMap((g) => tree.children[g].filter((c) => structural(tree, c)));
  }
  return levels;
}

/** Whether box g is a module holding other boxes. @param {Tree} tree @param {number} g */
function structural(tree, g) {
  return tree.kind[g] === "module" && tree.children[g].length > 0;
}

/**
 * The boxes to open: the graph, whole levels while they fit, then what fits of the next level.
 * @param {number[][]} levels  as moduleLevels returns them
 * @param {(open: number[]) => boolean} fits  whether the drawing with these boxes open fits the pane legibly
 * @returns {{open: number[], fits: boolean}}  fits false: not even the graph with every box closed fits
 */
export function pickOpen(levels, fits) {
  let open = [0];
  if (!fits(open)) return { open, fits: false };
  for (const level of levels) {
    const all = open.concat(level);
    if (fits(all)) { open = all; continue; }
    for (const g of level.slice(0, MAX_TRIES)) {
      const more = open.concat([g]);
      if (fits(more)) open = more;
    }
    break;
  }
  return { open, fits: true };
}
