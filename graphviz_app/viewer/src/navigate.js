// @ts-check
// Moving the selection with the arrow keys, along the drawn edges: to an input, to a consumer, or to a
// sibling (another input of the same consumer, another consumer of the same input), by the flow's direction.

/** @typedef {import("./types.js").Box} Box */
/** @typedef {import("./types.js").Rankdir} Rankdir */
/** @typedef {"input" | "consumer" | "before" | "after"} Move */

/** Per flow direction: the arrow key for each move. @type {Record<Rankdir, Record<string, Move>>} */
const MOVES = {
  TB: { ArrowUp: "input", ArrowDown: "consumer", ArrowLeft: "before", ArrowRight: "after" },
  BT: { ArrowDown: "input", ArrowUp: "consumer", ArrowLeft: "before", ArrowRight: "after" },
  LR: { ArrowLeft: "input", ArrowRight: "consumer", ArrowUp: "before", ArrowDown: "after" },
  RL: { ArrowRight: "input", ArrowLeft: "consumer", ArrowUp: "before", ArrowDown: "after" },
};

/**
 * What an arrow key does where the data flows `rankdir`, or null for another key.
 * @param {string} key @param {Rankdir} rankdir
 * @returns {Move | null}
 */
export function moveOf(key, rankdir) {
  return (MOVES[rankdir] || MOVES.TB)[key] || null;
}

/**
 * The item a move goes to from item `from`, or null when there is none.
 * @param {string} from  the selected item ("n3", "g7")
 * @param {Move} move
 * @param {[string, string][]} pairs  the drawn edges between items, from input to consumer
 * @param {Map<string, Box>} boxes  where each item is drawn
 * @param {Rankdir} rankdir
 * @returns {string | null}
 */
export function moveFrom(from, move, pairs, boxes, rankdir) {
  const here = boxes.get(from);
  if (!here) return null;
  const across = rankdir === "LR" || rankdir === "RL" ? (/** @type {Box} */ b) => b.y + b.h / 2 : (/** @type {Box} */ b) => b.x + b.w / 2;
  const inputs = pairs.filter(([, b]) => b === from).map(([a]) => a);
  const consumers = pairs.filter(([a]) => a === from).map(([, b]) => b);
  /** @param {string[]} keys @param {(k: string) => boolean} ok */
  const nearest = (keys, ok) => {
    let best = null, gap = Infinity;
    for (const k of new Set(keys)) {
      const b = boxes.get(k);
      if (!b || k === from || !ok(k)) continue;
      const d = Math.abs(across(b) - across(here));
      if (d < gap) { gap = d; best = k; }
    }
    return best;
  };
  if (move === "input") return nearest(inputs, () => true);
  if (move === "consumer") return nearest(consumers, () => true);
  const side = (/** @type {string} */ k) => (move === "before" ? across(boxes.get(k)) < across(here) : across(boxes.get(k)) > across(here));
  const siblings = [
    ...pairs.filter(([, b]) => consumers.includes(b)).map(([a]) => a),
    ...pairs.filter(([a]) => inputs.includes(a)).map(([, b]) => b),
  ];
  const sibling = nearest(siblings, side);
  if (sibling) return sibling;
  // No sibling that way: the nearest item drawn beside it, in the same rank.
  const rank = (/** @type {Box} */ b) => (rankdir === "LR" || rankdir === "RL" ? [b.x, b.x + b.w] : [b.y, b.y + b.h]);
  const [lo, hi] = rank(here);
  const beside = [...boxes.keys()].filter((k) => k !== "g0" && !boxes.get(k).open && (() => {
    const [a, b] = rank(boxes.get(k));
    return a < hi && b > lo;
  })());
  return nearest(beside, side);
}
