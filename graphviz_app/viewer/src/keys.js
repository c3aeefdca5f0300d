// @ts-check
// The viewer's keys: arrows move the selection along the drawn edges, Enter opens or closes the
// selected box, / goes to Find, Escape clears, ? shows the list of keys.
import { h } from "./dom.js";
import { moveFrom, moveOf } from "./navigate.js";

/** @typedef {import("./viewer.js").Viewer} Viewer */

/** What each key does, as the help lists it. @type {[string, string][]} */
export const KEYS = [
  ["↑ ↓", "to an input, to a consumer (along the flow)"],
  ["← →", "to the next input of the same consumer (or the next box beside it)"],
  ["Enter", "open or close the selected box (a node: close the box around it)"],
  ["/", "find"],
  ["Enter, Shift+Enter in Find", "next, previous match"],
  ["Escape", "clear the selection and the search, close this list"],
  ["?", "show or hide this list"],
];

/**
 * The list of keys, hidden until `?`.
 * @returns {HTMLElement}
 */
export function helpPanel() {
  return h("div", { class: "gv-help", "data-testid": "viewer-help", role: "dialog", "aria-label": "Keys", hidden: "" },
    h("h3", { text: "Keys" }),
    h("table", null, ...KEYS.map(([k, what]) => h("tr", null, h("th", { text: k }), h("td", { text: what })))));
}

/**
 * Handle a key pressed in the viewer; whether it was the viewer's.
 * @param {Viewer} viewer
 * @param {KeyboardEvent} ev
 * @returns {boolean}
 */
export function onKey(viewer, ev) {
  const typing = ev.target instanceof HTMLInputElement || ev.target instanceof HTMLSelectElement;
  if (ev.key === "Escape") {
    viewer.clear();
    if (typing) viewer.ui.pane.focus({ preventScroll: true });
    return true;
  }
  if (typing || ev.ctrlKey || ev.metaKey || ev.altKey) return false;
  if (ev.key === "/") {
    viewer.ui.search.focus();
    viewer.ui.search.select();
    return true;
  }
  if (ev.key === "?") {
    viewer.ui.help.hidden = !viewer.ui.help.hidden;
    return true;
  }
  if (ev.key === "Enter") return viewer.enter();
  const move = moveOf(ev.key, viewer.rankdir);
  if (!move) return false;
  const from = viewer.selectedItem();
  const to = from === null ? viewer.firstItem() : moveFrom(from, move, viewer.pairs, viewer.scene.boxes, viewer.rankdir);
  if (to) viewer.selectItem(to);
  return true;
}
