// @ts-check
// The viewer's HTML skeleton, built element by element (no markup strings).
import { helpPanel } from "./keys.js";

/** @typedef {import("./types.js").Overlay} Overlay */

/**
 * An HTML element with attributes (`text`: its textContent) and children.
 * @param {string} tag
 * @param {Record<string, string> | null} [attrs]
 * @param {...(Node | null | undefined | false)} kids
 * @returns {HTMLElement}
 */
function h(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const k in attrs || {}) {
    if (k === "text") e.textContent = attrs[k];
    else e.setAttribute(k, attrs[k]);
  }
  for (const kid of kids) if (kid) e.appendChild(kid);
  return e;
}
export { h };

/**
 * The viewer's parts, as skeleton() builds them.
 * @typedef {object} Skeleton
 * @property {HTMLElement} viewer
 * @property {HTMLElement} tools
 * @property {HTMLSelectElement} colour
 * @property {HTMLSelectElement} exporter  the export menu: "view.svg", "drawing.svg", "view.png", "drawing.png"
 * @property {HTMLElement} pane
 * @property {HTMLElement} details
 * @property {HTMLCanvasElement} overview
 * @property {HTMLElement} status
 * @property {HTMLElement} legend
 * @property {HTMLElement} body
 * @property {HTMLElement} help  the list of keys
 * @property {HTMLElement} tablePanel  the module table's panel (hidden until asked for)
 * @property {HTMLInputElement} search
 * @property {HTMLElement} count
 * @property {HTMLElement} scale
 * @property {Record<string, HTMLButtonElement>} buttons  by name: in, out, fit, end, collapse, modules, theme, keys, prev, next, close
 */

/** @param {HTMLElement} root @param {Overlay[]} overlays @returns {Skeleton} */
export function skeleton(root, overlays) {
  const colour = /** @type {HTMLSelectElement} */ (h("select", { class: "gv-color", "data-testid": "viewer-color", "aria-label": "Colour by" },
    h("option", { value: "kind", text: "colour: kind" })));
  for (const o of overlays) colour.appendChild(h("option", { value: o.key, text: "colour: " + o.label }));
  /** @type {Record<string, HTMLButtonElement>} */
  const buttons = {};
  /** @param {string} name @param {Record<string, string>} attrs */
  const button = (name, attrs) => (buttons[name] = /** @type {HTMLButtonElement} */ (h("button", { class: "gv-" + name, ...attrs })));
  const exporter = /** @type {HTMLSelectElement} */ (h("select", { class: "gv-export", "data-testid": "viewer-export",
    "aria-label": "Export a picture", title: "Save a picture of the view or of the whole drawing" },
    h("option", { value: "", text: "Export…" }),
    h("option", { value: "view.svg", text: "SVG of the view" }),
    h("option", { value: "drawing.svg", text: "SVG of the whole drawing" }),
    h("option", { value: "view.png", text: "PNG of the view" }),
    h("option", { value: "drawing.png", text: "PNG of the whole drawing" })));
  const search = /** @type {HTMLInputElement} */ (h("input", { class: "gv-search", type: "search", "data-testid": "viewer-search",
    "aria-label": "Find nodes", placeholder: "Find: op, tensor, module, shape" }));
  const scale = h("span", { class: "gv-scale", "data-testid": "viewer-scale", text: "100%" });
  const count = h("span", { class: "gv-count", "data-testid": "viewer-count", "aria-live": "polite" });
  const tools = h("div", { class: "gv-tools", role: "toolbar" },
    button("out", { title: "Zoom out", "aria-label": "Zoom out", text: "−" }),
    scale,
    button("in", { title: "Zoom in (or Ctrl+wheel)", "aria-label": "Zoom in", text: "+" }),
    button("fit", { title: "Show the whole drawing", text: "Fit" }),
    button("end", { title: "Go to the output end of the graph", "data-testid": "viewer-output", text: "Output" }),
    button("collapse", { title: "Close every box", text: "Close all" }),
    button("modules", { title: "A table of the modules", "aria-pressed": "false", "data-testid": "viewer-table-button", text: "Modules" }),
    overlays.length ? colour : null,
    exporter,
    search,
    button("prev", { title: "Previous match (Shift+Enter)", "aria-label": "Previous match", text: "◀" }),
    button("next", { title: "Next match (Enter)", "aria-label": "Next match", text: "▶" }),
    count,
    button("theme", { title: "Dark or light (follows the system until chosen)", "aria-label": "Dark or light",
                      "data-testid": "viewer-theme", text: "◐" }),
    button("keys", { title: "Keys (?)", "aria-label": "Keys", "data-testid": "viewer-help-button", text: "?" }));
  const pane = h("div", { class: "gv-pane", "data-testid": "viewer-pane", tabindex: "0" });
  const details = h("aside", { class: "gv-details", "data-testid": "viewer-details", hidden: "" },
    button("close", { title: "Close the details", "aria-label": "Close details", text: "×" }),
    h("h3", { class: "gv-details-title" }), h("table", { class: "gv-details-rows" }));
  const overview = /** @type {HTMLCanvasElement} */ (h("canvas", { class: "gv-overview", "data-testid": "viewer-overview", width: "180", height: "130" }));
  const help = helpPanel();
  const tablePanel = h("aside", { class: "gv-tablepanel", "data-testid": "viewer-table-panel", hidden: "" });
  const body = h("div", { class: "gv-body" }, tablePanel, pane, details, overview, help);
  const status = h("div", { class: "gv-status", "data-testid": "viewer-status" });
  const legend = h("div", { class: "gv-legend", "data-testid": "viewer-legend" });
  const viewer = h("div", { class: "gv-viewer", "data-testid": "graph-viewer" }, tools, body, legend, status);
  root.replaceChildren(viewer);
  return { viewer, tools, colour, exporter, help, tablePanel, pane, details, overview, status, legend, body, search, count, scale, buttons };
}

/** Show `rows` under `title` in the details panel. @param {HTMLElement} details @param {string} title @param {[string, string][]} rows */
export function showRows(details, title, rows) {
  details.hidden = false;
  details.querySelector(".gv-details-title").textContent = title;
  const table = details.querySelector(".gv-details-rows");
  table.replaceChildren(...rows.map(([k, v]) => h("tr", null, h("th", { text: k }), h("td", { text: String(v) }))));
}
