// The viewer's HTML skeleton, built element by element (no markup strings).
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

export function skeleton(root, overlays) {
  const colour = h("select", { class: "gv-color", "data-testid": "viewer-color", "aria-label": "Colour by" },
    h("option", { value: "kind", text: "colour: kind" }));
  for (const o of overlays) colour.appendChild(h("option", { value: o.key, text: "colour: " + o.label }));
  const tools = h("div", { class: "gv-tools", role: "toolbar" },
    h("button", { class: "gv-out", title: "Zoom out", "aria-label": "Zoom out", text: "−" }),
    h("span", { class: "gv-scale", "data-testid": "viewer-scale", text: "100%" }),
    h("button", { class: "gv-in", title: "Zoom in (or Ctrl+wheel)", "aria-label": "Zoom in", text: "+" }),
    h("button", { class: "gv-fit", title: "Show the whole drawing", text: "Fit" }),
    h("button", { class: "gv-end", title: "Go to the output", text: "Output" }),
    h("button", { class: "gv-collapse", title: "Close every box", text: "Close all" }),
    overlays.length ? colour : null,
    h("input", { class: "gv-search", type: "search", "data-testid": "viewer-search", "aria-label": "Find nodes",
                 placeholder: "Find: op, tensor, module, shape" }),
    h("button", { class: "gv-prev", title: "Previous match (Shift+Enter)", "aria-label": "Previous match", text: "◀" }),
    h("button", { class: "gv-next", title: "Next match (Enter)", "aria-label": "Next match", text: "▶" }),
    h("span", { class: "gv-count", "data-testid": "viewer-count", "aria-live": "polite" }));
  const pane = h("div", { class: "gv-pane", "data-testid": "viewer-pane", tabindex: "0" });
  const details = h("aside", { class: "gv-details", "data-testid": "viewer-details", hidden: "" },
    h("button", { class: "gv-close", title: "Close the details", "aria-label": "Close details", text: "×" }),
    h("h3", { class: "gv-details-title" }), h("table", { class: "gv-details-rows" }));
  const overview = h("canvas", { class: "gv-overview", "data-testid": "viewer-overview", width: "180", height: "130" });
  const body = h("div", { class: "gv-body" }, pane, details, overview);
  const status = h("div", { class: "gv-status", "data-testid": "viewer-status" });
  const legend = h("div", { class: "gv-legend", "data-testid": "viewer-legend" });
  const viewer = h("div", { class: "gv-viewer", "data-testid": "graph-viewer" }, tools, body, legend, status);
  root.replaceChildren(viewer);
  return { viewer, tools, colour, pane, details, overview, status, legend, body };
}

export function showRows(details, title, rows) {
  details.hidden = false;
  details.querySelector(".gv-details-title").textContent = title;
  const table = details.querySelector(".gv-details-rows");
  table.replaceChildren(...rows.map(([k, v]) => h("tr", null, h("th", { text: k }), h("td", { text: String(v) }))));
}
