// @ts-check
// The viewer: one graph, its boxes, the drawing, and what a person does with it.
import { StepChart, companionSeries, drawableSeries } from "./chart.js";
import { Scale } from "./colour.js";
import { groupRows, nodeRows, overlayRows } from "./details.js";
import { showRows, skeleton } from "./dom.js";
import { drawScene, el } from "./draw.js";
import { readFragment, writeFragment } from "./fragment.js";
import { GraphData } from "./graph.js";
import { onKey } from "./keys.js";
import { Layouts } from "./layout.js";
import { drawMarks } from "./marks.js";
import { moduleLevels, pickOpen } from "./opening.js";
import { savePicture } from "./picture.js";
import { PanZoom, READABLE_K, fitScaleOf } from "./panzoom.js";
import { buildScene } from "./scene.js";
import { Search } from "./search.js";
import { ModuleTable } from "./table.js";
import { Tree } from "./tree.js";

/** @typedef {import("./types.js").Payload} Payload */
/** @typedef {import("./types.js").Overlay} Overlay */
/** @typedef {import("./types.js").Scene} Scene */
/** @typedef {import("./layout.js").Viz} Viz */

/**
 * How a page embeds the viewer.
 * @typedef {object} ViewerOptions
 * @property {string} [fragment]  the view to open on (a URL fragment, see fragment.js)
 * @property {(hash: string) => void} [onView]  told the view's fragment after every change
 * @property {boolean} [focus]  take the keyboard at once (a page that is only the viewer)
 * @property {() => import("./worker.js").LayoutWorker | null} [worker]  starts (once) where big boxes are laid out
 *   (none: on the page)
 */

let viewers = 0;

export class Viewer {
  /**
   * @param {HTMLElement} root
   * @param {Payload} data
   * @param {Viz} vizInstance
   * @param {ViewerOptions} [options]
   */
  constructor(root, data, vizInstance, options) {
    /** @type {ViewerOptions} */
    this.options = options || {};
    this.data = data;
    this.graph = new GraphData(data.graph);
    this.tree = new Tree(data.tree, this.graph);
    this.overlays = (data.overlays || []).filter((o) => o && typeof o.key === "string" && Array.isArray(o.node));
    this.rankdir = (data.options && data.options.rankdir) || "TB";
    this.layouts = new Layouts(vizInstance, this.rankdir);
    this.layouts.startWorker = this.options.worker || (() => null);
    let again = false;  // one refresh for any number of layouts made meanwhile
    this.layouts.onReady = () => {
      if (again) return;
      again = true;
      requestAnimationFrame(() => { again = false; this.refresh(); });
    };
    this.search = new Search(this.graph);
    this.ui = skeleton(root, this.overlays);
    this.root = this.ui.viewer;
    /** @type {{sel: number | null, selGroup: number | null, color: string, matches: number[], at: number}} */
    this.state = { sel: null, selGroup: null, color: "kind", matches: [], at: -1 };
    /** @type {import("./colour.js").Scale | null} */
    this.paint = null;
    /** @type {StepChart | null} */
    this.chart = null;
    /** @type {Scene | null} */
    this.scene = null;
    /** @type {string | null} */
    this._query = null;
    /** @type {ModuleTable | null} built when first shown */
    this.table = null;
    /** @type {[string, string][]} the drawn edges between items */
    this.pairs = [];
    this.markerId = `gv-arrow-${++viewers}`;
    this._svg();
    this._chart();
    this.savedOf = this._savedIndex();
    this.panzoom = new PanZoom(this.ui.pane, this.svg, this.viewport, this.ui.overview,
      (k) => { this.ui.scale.textContent = Math.round(k * 100) + "%"; });
    this._wire();
    this._start();
  }
  _svg() {
    this.svg = /** @type {SVGSVGElement} */ (el("svg", { class: "gv-svg", width: "100%", height: "100%" }, this.ui.pane));
    const defs = el("defs", {}, this.svg);
    const marker = el("marker", { id: this.markerId, viewBox: "0 0 10 10", refX: "9", refY: "5", markerWidth: "7",
      markerHeight: "7", orient: "auto-start-reverse" }, defs);
    el("path", { d: "M0,0L10,5L0,10z", class: "gv-arrow" }, marker);
    this.viewport = /** @type {SVGGElement} */ (el("g", { class: "gv-viewport" }, this.svg));
  }
  // The chart of a per-step series under the graph (none when the payload has none).
  _chart() {
    const series = drawableSeries(this.data.series);
    if (!series) return;
    this.chart = new StepChart(this.ui.viewer, this.ui.legend, series, this.graph, (step, node) => {
      if (node >= 0) this.select(node, { reveal: true, center: true });
      else this.chart.highlight(step);
    }, companionSeries(this.data.series, series));
  }
  /** @returns {(i: number) => number[]} the nodes whose tensors node i saved (indexed when first asked: the
   * first view of a million-node graph does not wait for it) */
  _savedIndex() {
    /** @type {Map<number, number[]> | null} */
    let saved = null;
    const g = this.graph;
    return (i) => {
      if (!saved) {
        saved = new Map();
        for (let e = 0; e < g.m; e++) {
          if (g.edgeKind(e) !== "saved") continue;
          const list = saved.get(g.dst[e]);
          if (list) list.push(g.src[e]); else saved.set(g.dst[e], [g.src[e]]);
        }
      }
      return saved.get(i) || [];
    };
  }
  _start() {
    const t = this.tree;
    const keys = this.overlays.map((o) => o.key);
    const frag = readFragment(this.options.fragment || "", t, this.graph, keys);
    const given = frag.open || (this.data.options && this.data.options.opening === "given" ? this.data.open : null);
    const auto = !given && frag.sel === null && !frag.expand.length;
    // The status line and the legend first: they take their height from the pane the opening view must fit.
    if (frag.color) this._colour(frag.color, false);
    const title = this.data.title ? `${this.data.title}: ` : "";
    this.ui.status.textContent = `${title}${this.graph.n.toLocaleString()} nodes, ${this.graph.m.toLocaleString()} edges` +
      [...(this.data.graph.notes || []), ...(this.data.notes || [])].map((n) => " · " + n).join("");
    for (const [g, k] of frag.inst) t.selected.set(g, k);
    const fits = auto && this._pickModuleLevel();
    if (!auto) for (const g of given || this.data.open || [0]) if (g >= 0 && g < t.parent.length) t.open.add(g);
    for (const g of frag.expand) t.revealGroup(g);
    this.refresh();
    if (frag.sel !== null) this.select(frag.sel, { reveal: true, center: true });
    else if (fits) this.panzoom.fit();
    else this.showOutput();
    if (frag.query) { this.ui.search.value = frag.query; this._find(frag.query); }
    this.root.dataset.state = "ready";
    this.root.dataset.firstViewMs = String(Math.round(performance.now()));
    /** @type {(f: () => void) => void} */
    const idle = window.requestIdleCallback || ((f) => setTimeout(f, 50));
    // So the first search is quick, in slices of 20 ms: a million nodes' texts would hold input for hundreds.
    const slice = () => { if (!this.search.indexSome(20)) idle(slice); };
    idle(slice);
  }
  // What the tree's state looks like now: laid out (only what changed), drawn, outlined.
  refresh() {
    const t0 = performance.now();
    this.scene = buildScene(this.graph, this.tree, this.layouts);
    const paint = this.state.color === "kind" ? null : this.paint;
    this.pairs = drawScene(this.viewport, { scene: this.scene, graph: this.graph, tree: this.tree, paint,
      markerId: this.markerId, rankdir: this.rankdir });
    drawMarks(this.viewport, { scene: this.scene, graph: this.graph, tree: this.tree, paint });
    this.panzoom.content(this.scene.width, this.scene.height, this.scene.boxes);
    this._outline();
    this.root.dataset.layouts = String(this.layouts.runs);
    this.root.dataset.waiting = String(this.scene.waiting.size);
    this.root.dataset.placeholders = String(this.layouts.placeholders);
    this.root.dataset.workerLayouts = String(this.layouts.inWorker);
    this.root.dataset.drawnNodes = String(this.viewport.querySelectorAll("[data-node]").length);
    this.root.dataset.lastRefreshMs = (performance.now() - t0).toFixed(1);
    this._saveView();
  }
  // Open the deepest module level that fits the pane with labels at least 10 px (READABLE_K); whether one does.
  _pickModuleLevel() {
    const { W, H } = this.panzoom.size();
    this.layouts.sync = true;  // the sizes must be the real ones to judge what fits
    const picked = pickOpen(moduleLevels(this.tree), (open) => {
      this.tree.open = new Set(open);
      const scene = buildScene(this.graph, this.tree, this.layouts);
      return fitScaleOf(W, H, scene.width, scene.height) >= READABLE_K;
    });
    this.layouts.sync = false;
    this.tree.open = new Set(picked.open);
    this.root.dataset.openingLevel = String(picked.open.length);
    return picked.fits;
  }
  // The output end, readable (the whole drawing when it is readable so).
  showOutput() {
    const outputs = this.graph.outputs();
    const target = outputs.length ? this.scene.boxes.get(this.tree.rep(outputs[0])) : null;
    this.panzoom.opening(target);
  }
  _outline() {
    for (const e of this.viewport.querySelectorAll(".gv-selected, .gv-match")) e.classList.remove("gv-selected", "gv-match");
    /** @param {string} key @param {string} cls */
    const mark = (key, cls) => {
      const sel = key[0] === "n" ? `[data-node="${CSS.escape(this.graph.id(+key.slice(1)))}"]` : `[data-group="${key}"]`;
      const found = this.viewport.querySelector(sel);
      if (found) found.classList.add(cls);
    };
    for (const i of this.state.matches.slice(0, 2000)) mark(this.tree.rep(i), "gv-match");
    if (this.state.sel !== null) mark(this.tree.rep(this.state.sel), "gv-selected");
    else if (this.state.selGroup !== null) mark("g" + this.state.selGroup, "gv-selected");
  }
  /**
   * Select node i: outline it and show its details.
   * @param {number} i
   * @param {{reveal?: boolean, center?: boolean}} [how]  reveal: open the boxes around it; center: pan to it
   */
  select(i, { reveal = false, center = false } = {}) {
    this.state.sel = i;
    this.state.selGroup = null;
    if (reveal) {
      this.tree.reveal(i);
      this.refresh();
    } else {
      this._outline();
      this._saveView();
    }
    showRows(this.ui.details, `${this.graph.name(i)}`, nodeRows(this.graph, i, this.savedOf).concat(this._moreRows(i)));
    if (this.chart) this.chart.highlight(this.chart.nodeStep(i));
    if (center) {
      const b = this.scene.boxes.get(this.tree.rep(i));
      if (b) this.panzoom.centerOn(b);
    }
  }
  // Rows the overlays and the chart add to node i's details (the gradient's are there already).
  /** @param {number} i @returns {[string, string][]} */
  _moreRows(i) {
    const rows = overlayRows(this.overlays, i);
    return this.chart ? rows.concat(this.chart.rows(i)) : rows;
  }
  /** @param {number} g */
  selectGroup(g) {
    if (this.chart) this.chart.highlight(-1);
    this.state.sel = null;
    this.state.selGroup = g;
    showRows(this.ui.details, this.tree.title(g), groupRows(this.graph, this.tree, g, this.overlays));
    if (this.table) this.table.mark(g);
    this._outline();
  }
  /** Open or close box g, keeping it where it is on screen. @param {number} g */
  toggle(g) {
    const b = this.scene.boxes.get("g" + g);
    const before = b ? { x: b.x, y: b.y } : null;
    this.tree.toggle(g);
    this.refresh();
    const after = this.scene.boxes.get("g" + g);
    if (before && after) this.panzoom.keepStill(before, after);  // the box stays under the pointer
    this.state.sel = null;
    this.state.selGroup = g;
    this._outline();
  }
  /** Show the next (by 1) or previous (by -1) instance of repeat g. @param {number} g @param {number} by */
  step(g, by) {
    this.tree.setInstance(g, this.tree.shown(g) + by);
    this.refresh();
  }
  /** Colour by overlay `key` ("kind": by node kind). @param {string} key @param {boolean} [redraw] */
  _colour(key, redraw = true) {
    const o = this.overlays.find((x) => x.key === key);
    this.state.color = o ? key : "kind";
    this.paint = o ? new Scale(o) : null;
    this.ui.colour.value = this.state.color;
    const marked = this.paint ? [...this.paint.marks].filter((i) => i >= 0 && i < this.graph.n) : [];
    this.ui.legend.textContent = (this.paint ? `${o.label}: ${this.paint.legend()} (blue low, red high; grey: none)` : "") +
      (marked.length ? `\n◎ ringed: ${marked.map((i) => this.graph.name(i)).join(", ")}` + (o.mark_label ? ` (${o.mark_label})` : "") : "");
    if (redraw) this.refresh();
  }
  /** @param {string} query */
  _find(query) {
    const t0 = performance.now();
    this.state.matches = this.search.find(query);
    this.state.at = -1;
    this._count();
    this._outline();
    this.root.dataset.lastSearchMs = (performance.now() - t0).toFixed(1);
  }
  _count() {
    const n = this.state.matches.length, q = this.ui.search.value.trim();
    this.ui.tools.querySelector(".gv-count").textContent = !q ? "" : n === 0 ? "no match" :
      this.state.at >= 0 ? `${this.state.at + 1} of ${n.toLocaleString()}` : `${n.toLocaleString()} match${n === 1 ? "" : "es"}`;
  }
  /** Go to the next (by 1) or previous (by -1) match. @param {number} by */
  next(by) {
    const input = this.ui.search;
    if (input.value.trim() && !this.state.matches.length) this._find(input.value);
    const n = this.state.matches.length;
    if (!n) return;
    const t0 = performance.now();
    this.state.at = ((this.state.at + by) % n + n) % n;
    this.select(this.state.matches[this.state.at], { reveal: true, center: true });
    this._count();
    this.root.dataset.lastGotoMs = (performance.now() - t0).toFixed(1);
  }
  /**
   * Save a picture: "view.svg", "drawing.svg", "view.png" or "drawing.png" (what is on screen, or all of it).
   * @param {string} what
   * @returns {Promise<void>}
   */
  async exportPicture(what) {
    const t0 = performance.now();
    await savePicture({ svg: this.svg, viewport: this.viewport, panzoom: this.panzoom, scene: this.scene,
      title: this.data.title || "" }, what);
    this.root.dataset.lastExportMs = (performance.now() - t0).toFixed(1);
  }
  /** Show or hide the module table. @param {boolean} show */
  showTable(show) {
    if (show && !this.table) {
      this.table = new ModuleTable(this.ui.tablePanel, this.graph, this.tree, this.overlays, (g) => this.pickModule(g));
    }
    this.ui.tablePanel.hidden = !show;
    this.ui.buttons.modules.setAttribute("aria-pressed", String(show));
  }
  /** Select box g (a module's) in the drawing: the boxes around it opened, in view. @param {number} g */
  pickModule(g) {
    const p = this.tree.parent[g];
    if (p > 0) this.tree.revealGroup(p);
    this.refresh();
    this.selectGroup(g);
    const b = this.scene.boxes.get("g" + g);
    if (b && !this.panzoom.shows(b)) this.panzoom.centerOn(b);
  }
  /** The selected item's key ("n3", "g7"), or null. @returns {string | null} */
  selectedItem() {
    if (this.state.sel !== null) return this.tree.rep(this.state.sel);
    return this.state.selGroup !== null ? "g" + this.state.selGroup : null;
  }
  /** Where the keys start with nothing selected: the output, else the first item drawn. @returns {string | null} */
  firstItem() {
    const outputs = this.graph.outputs();
    if (outputs.length) return this.tree.rep(outputs[0]);
    for (const key of this.scene.boxes.keys()) if (key !== "g0") return key;
    return null;
  }
  /** Select an item by key, and bring it into view when it is not. @param {string} key */
  selectItem(key) {
    const id = +key.slice(1);
    if (key[0] === "n") this.select(id);
    else this.selectGroup(id);
    const b = this.scene.boxes.get(key);
    if (b && !this.panzoom.shows(b)) this.panzoom.centerOn(b);
  }
  /** Enter: open or close the selected box; a node closes the box around it. Whether anything was selected. */
  enter() {
    let g = this.state.selGroup;
    if (g === null && this.state.sel !== null) {
      const key = this.tree.rep(this.state.sel);
      g = key[0] === "g" ? +key.slice(1) : this.tree.nodeGroup[this.state.sel];
    }
    if (g === null || g === 0) return false;
    this.toggle(g);
    return true;
  }
  /** Escape: no selection, no search, no details, no list of keys. */
  clear() {
    this.state.sel = null;
    this.state.selGroup = null;
    this.ui.search.value = "";
    this.state.matches = [];
    this.state.at = -1;
    this._query = null;
    this._count();
    this.ui.details.hidden = true;
    this.ui.help.hidden = true;
    if (this.chart) this.chart.highlight(-1);
    this._outline();
    this._saveView();
  }
  _saveView() {
    const hash = writeFragment(this.tree, this.graph, this.state);
    this.root.dataset.view = hash;
    if (this.options.onView) this.options.onView(hash);
  }
  _wire() {
    const buttons = this.ui.buttons, pz = this.panzoom;
    buttons.in.onclick = () => pz.zoomBy(1.25);
    buttons.out.onclick = () => pz.zoomBy(1 / 1.25);
    buttons.fit.onclick = () => pz.fit();
    buttons.end.onclick = () => this.showOutput();
    buttons.theme.onclick = () => {
      const dark = this.root.dataset.theme ? this.root.dataset.theme === "dark" :
        !!(window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches);
      this.root.dataset.theme = dark ? "light" : "dark";
    };
    buttons.modules.onclick = () => this.showTable(this.ui.tablePanel.hidden);
    buttons.keys.onclick = () => { this.ui.help.hidden = !this.ui.help.hidden; };
    buttons.collapse.onclick = () => { this.tree.open = new Set([0]); this.refresh(); pz.fit(); };
    this.ui.colour.onchange = () => this._colour(this.ui.colour.value);
    this.ui.exporter.onchange = () => {
      const what = this.ui.exporter.value;
      this.ui.exporter.value = "";
      if (what) this.exportPicture(what).catch((e) => { this.ui.status.textContent = "Could not export: " + (e instanceof Error ? e.message : String(e)); });
    };
    const input = this.ui.search;
    /** @type {ReturnType<typeof setTimeout> | undefined} */
    let timer;
    input.oninput = () => { clearTimeout(timer); timer = setTimeout(() => this._find(input.value), 120); };
    input.onkeydown = (ev) => {
      if (ev.key !== "Enter") return;
      ev.preventDefault();
      clearTimeout(timer);
      if (this._query !== input.value) { this._find(input.value); this._query = input.value; }
      this.next(ev.shiftKey ? -1 : 1);
    };
    buttons.next.onclick = () => this.next(1);
    buttons.prev.onclick = () => this.next(-1);
    buttons.close.onclick = () => { this.ui.details.hidden = true; };
    pz.onClick = (target) => this._click(target);
    this.ui.pane.addEventListener("pointerdown", () => this.ui.pane.focus({ preventScroll: true }));
    this.root.addEventListener("keydown", (ev) => { if (onKey(this, ev)) ev.preventDefault(); });
    if (this.options.focus) this.ui.pane.focus({ preventScroll: true });
  }
  /** @param {Element} target */
  _click(target) {
    const step = target.closest("[data-step]");
    const box = /** @type {SVGElement | null} */ (target.closest("[data-group]"));
    if (step && box) return this.step(+box.dataset.group.slice(1), +step.getAttribute("data-step"));
    const node = /** @type {SVGElement | null} */ (target.closest("[data-node]"));
    if (node) return this.select(this.graph.indexOf(node.dataset.node));
    if (!box) return;
    const g = +box.dataset.group.slice(1);
    if (box.classList.contains("gv-closed")) return this.toggle(g);
    if (target.closest(".gv-bar, .gv-frame-title")) return this.toggle(g);
    this.selectGroup(g);
  }
}
