// @ts-check
// Two viewers side by side, in step: pan, zoom, opening a box, selecting and colouring act on both panes.
import { EDGE_MARKS, STATUSES, boxHolds, compareRows, edgeFlags, edgeMarks, holdsClass, matchBoxes, summaryText } from "./compare.js";
import { h } from "./dom.js";
import { Viewer } from "./viewer.js";

/** @typedef {import("./compare.js").CompareData} CompareData */
/** @typedef {import("./viewer.js").ViewerOptions} ViewerOptions */
/** @typedef {import("./layout.js").Viz} Viz */
/** @typedef {import("./panzoom.js").PanZoom} PanZoom */

const CMP_CLASSES = ["gv-cmp-added", "gv-cmp-removed", "gv-cmp-changed", "gv-cmp-holds-added", "gv-cmp-holds-removed",
  "gv-cmp-holds-changed", ...EDGE_MARKS.slice(1)];

// One pane's viewer: tells its Link what a person did, after doing it.
class PaneViewer extends Viewer {
  /** @type {Link | null} */
  link = null;
  refresh() {
    super.refresh();
    if (this.link) this.link.paint(this);
  }
  /** @param {number} g */
  toggle(g) {
    super.toggle(g);
    if (this.link) this.link.follow(this, (o, gb) => o.match(gb, this.tree.open.has(g)), g);
  }
  /** @param {number} i @param {{reveal?: boolean, center?: boolean}} [how] */
  select(i, how) {
    super.select(i, how);
    if (this.link) this.link.selected(this, i);
  }
  /** @param {number} g */
  selectGroup(g) {
    super.selectGroup(g);
    if (this.link) this.link.follow(this, (o, gb) => o.pickModule(gb), g);
  }
  /** @param {number} g @param {number} by */
  step(g, by) {
    super.step(g, by);
    const shown = this.tree.shown(g);  // an instance the other repeat lacks (a layer only here): it stays
    if (this.link) this.link.follow(this, (o, gb) => { if (shown < o.tree.count[gb]) { o.tree.setInstance(gb, shown); o.refresh(); } }, g);
  }
  /** @param {string} key @param {boolean} [redraw] */
  _colour(key, redraw = true) {
    super._colour(key, redraw);
    if (this.link && redraw) this.link.coloured(this, this.state.color);
  }
  /** @param {number} i @returns {[string, string][]} */
  _moreRows(i) {
    return this.link ? super._moreRows(i).concat(this.link.rows(this, i)) : super._moreRows(i);
  }
  /** Open (or close) box g as its counterpart is; select it, in view. @param {number} g @param {boolean} open */
  match(g, open) {
    if (g > 0 && this.tree.open.has(g) !== open) this.tree.toggle(g);
    this.refresh();
    this.selectGroup(g);
    const b = this.scene.boxes.get("g" + g);
    if (b && !this.panzoom.shows(b)) this.panzoom.centerOn(b);
  }
}

// The two panes and what keeps them in step.
class Link {
  /** @param {CompareData} data @param {[PaneViewer, PaneViewer]} panes @param {HTMLSelectElement} colour */
  constructor(data, panes, colour) {
    this.data = data;
    this.panes = panes;
    this.colour = colour;
    this.busy = false;  // while one pane follows the other: the follower's own moves are not passed back
    this.boxes = [matchBoxes(panes[0].tree, panes[1].tree, data.match[0]), matchBoxes(panes[1].tree, panes[0].tree, data.match[1])];
    this.holds = [boxHolds(panes[0].tree, data.status[0]), boxHolds(panes[1].tree, data.status[1])];
    this.edges = [edgeFlags(data.edges[0], panes[0].graph.m), edgeFlags(data.edges[1], panes[1].graph.m)];
    /** @type {Map<PanZoom, {k: number, tx: number, ty: number}>} */
    this.last = new Map();
  }
  /** @param {PaneViewer} v @returns {0 | 1} */
  side(v) { return v === this.panes[0] ? 0 : 1; }
  /**
   * Let the other pane do `what` with the counterpart of box g (none: nothing).
   * @param {PaneViewer} v @param {(other: PaneViewer, g: number) => void} what @param {number} g
   */
  follow(v, what, g) {
    if (this.busy) return;
    const side = this.side(v), gb = this.boxes[side][g];
    if (gb <= 0 && g > 0) return;
    this._quietly(() => what(this.panes[1 - side], gb));
  }
  /** Node i was selected in pane v: select its counterpart (its boxes opened, in view), or say there is none. @param {PaneViewer} v @param {number} i */
  selected(v, i) {
    if (this.busy) return;
    const side = this.side(v), other = this.panes[1 - side], j = this.data.match[side][i];
    this._quietly(() => {
      if (j >= 0) return other.select(j, { reveal: true, center: true });
      other.state.sel = null;
      other.state.selGroup = null;
      other._outline();
      other.ui.details.hidden = true;
    });
    v.root.dataset.counterpart = j >= 0 ? other.graph.id(j) : "";
  }
  /** @param {PaneViewer} v @param {string} key */
  coloured(v, key) {
    this.colour.value = key;
    if (this.busy) return;
    const other = this.panes[1 - this.side(v)];
    this._quietly(() => other._colour(other.overlays.some((o) => o.key === key) ? key : "kind"));
  }
  /** @param {PaneViewer} v @param {number} i @returns {[string, string][]} */
  rows(v, i) {
    const side = this.side(v), other = this.panes[1 - side];
    return compareRows(this.data, side, i, (j) => `${other.graph.name(j)} (${other.graph.id(j)})`);
  }
  /** Mark the drawn nodes and boxes of pane v by their status. @param {PaneViewer} v */
  paint(v) {
    const side = this.side(v), status = this.data.status[side], holds = this.holds[side];
    for (const e of v.viewport.querySelectorAll("[data-node]")) {
      e.classList.remove(...CMP_CLASSES);
      const code = status[v.graph.indexOf(/** @type {SVGElement} */ (e).dataset.node)];
      if (code > 0) e.classList.add("gv-cmp-" + STATUSES[code]);
    }
    // A line stands for the graph edges between two drawn items (nodes or closed boxes): marked by what changed.
    const marks = v.scene ? edgeMarks(v.tree, v.graph, v.scene.open, this.edges[side], status, side) : new Map();
    for (const e of v.viewport.querySelectorAll("path[data-edge]")) {
      e.classList.remove(...CMP_CLASSES);
      const [s, d] = /** @type {SVGElement} */ (e).dataset.edge.split(">").map((id) => v.graph.indexOf(id));
      const cls = s >= 0 && d >= 0 ? marks.get(v.tree.rep(s) + ">" + v.tree.rep(d)) : undefined;
      if (cls) e.classList.add(cls);
    }
    for (const e of v.viewport.querySelectorAll("[data-group]")) {
      e.classList.remove(...CMP_CLASSES);
      const cls = holdsClass(holds[+(/** @type {SVGElement} */ (e).dataset.group.slice(1))]);
      if (cls) e.classList.add(cls);
    }
  }
  /** Pane moves are passed on as the same change of view (each keeps its own offset). @param {PanZoom} pz */
  moved(pz) {
    const prev = this.last.get(pz), now = { k: pz.k, tx: pz.tx, ty: pz.ty };
    this.last.set(pz, now);
    if (this.busy || !prev || (prev.k === now.k && prev.tx === now.tx && prev.ty === now.ty)) return;
    const q = this.panes[0].panzoom === pz ? this.panes[1].panzoom : this.panes[0].panzoom, r = now.k / prev.k;
    q.k *= r;
    q.tx = r * (q.tx - prev.tx) + now.tx;
    q.ty = r * (q.ty - prev.ty) + now.ty;
    this._quietly(() => q.apply());
  }
  /** @param {() => void} f */
  _quietly(f) {
    this.busy = true;
    try { f(); } finally { this.busy = false; }
  }
}

/**
 * The compare view in `root`: a line of what differs, a colouring for both panes, the two viewers.
 * @param {HTMLElement} root @param {CompareData} data @param {Viz} vizInstance @param {ViewerOptions} [options]
 * @returns {{panes: [PaneViewer, PaneViewer], link: Link}}
 */
export function mountPanes(root, data, vizInstance, options) {
  const hosts = [0, 1].map(() => h("div", { class: "gv-compare-host" }));
  const colour = /** @type {HTMLSelectElement} */ (h("select", { class: "gv-compare-colour", "data-testid": "compare-colour",
    "aria-label": "Colour both graphs by" }, h("option", { value: "kind", text: "colour: kind, outlined by change" })));
  for (const o of data.panes[0].overlays || []) colour.appendChild(h("option", { value: o.key, text: "colour: " + o.label }));
  const key = h("span", { class: "gv-compare-key" },
    ...["removed", "added", "changed"].map((s) => h("span", { class: `gv-compare-swatch gv-cmp-${s}`, text: s })));
  const head = h("div", { class: "gv-compare-head" },
    h("span", { class: "gv-compare-summary", "data-testid": "compare-summary", text: summaryText(data) }), key, colour);
  const panes = h("div", { class: "gv-compare-panes" }, ...[0, 1].map((side) => h("section", {
    class: "gv-compare-pane", "data-testid": "compare-pane", "data-side": side ? "b" : "a" },
  h("div", { class: "gv-compare-label", text: data.labels[side] }), hosts[side])));
  const top = h("div", { class: "gv-compare", "data-testid": "compare" }, head, panes);
  root.replaceChildren(top);
  // Pane a holds the pair's view (`fragment`, told to `onView`): b follows a, so a's view is the pair's.
  /** @type {ViewerOptions} */
  const opts = { ...(options || {}), fragment: "", onView: null };
  const a = new PaneViewer(hosts[0], data.panes[0], vizInstance,
    { ...opts, fragment: (options && options.fragment) || "", onView: (options && options.onView) || null });
  const b = new PaneViewer(hosts[1], data.panes[1], vizInstance, { ...opts, focus: false });
  const link = new Link(data, [a, b], colour);
  // b opens what a opened, and both show the same end of the graph (or a's selection's counterpart).
  b.tree.open = new Set([0, ...[...a.tree.open].map((g) => link.boxes[0][g]).filter((g) => g > 0)]);
  a.link = b.link = link;
  a.refresh();
  b.refresh();
  b.showOutput();
  if (a.state.color !== "kind") link.coloured(a, a.state.color);
  if (a.state.sel !== null) link.selected(a, a.state.sel);
  for (const v of [a, b]) {
    v.panzoom.onMove = (pz) => link.moved(pz);
    link.moved(v.panzoom);
    const fit = v.ui.buttons.fit, end = v.ui.buttons.end, collapse = v.ui.buttons.collapse, theme = v.ui.buttons.theme;
    const toggleTheme = theme.onclick;
    theme.onclick = (ev) => {  // both panes and the line above them take the theme chosen
      toggleTheme.call(theme, ev);
      for (const e of [a.root, b.root, top]) e.dataset.theme = v.root.dataset.theme;
    };
    fit.onclick = () => link._quietly(() => { a.panzoom.fit(); b.panzoom.fit(); });
    end.onclick = () => link._quietly(() => { a.showOutput(); b.showOutput(); });
    collapse.onclick = () => link._quietly(() => {
      for (const w of [a, b]) { w.tree.open = new Set([0]); w.refresh(); w.panzoom.fit(); }
    });
  }
  colour.onchange = () => a._colour(colour.value);
  top.dataset.state = "ready";
  top.dataset.firstViewMs = String(Math.round(performance.now()));
  return { panes: [a, b], link };
}
