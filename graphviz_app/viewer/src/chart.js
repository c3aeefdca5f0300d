// @ts-check
// A chart of one series over steps (live bytes over the backward steps): plain SVG, text as textContent.
// The peak is marked and labelled; hovering says a step's node and value; clicking picks the step.
// A second series over the same steps (`of`: the first one's key; the measured live bytes) is drawn
// as a line beside it, its peak marked too, with a legend naming both.
import { format } from "./colour.js";
import { collectiveRows, collectiveText } from "./details.js";
import { h } from "./dom.js";
import { el } from "./draw.js";
import { placeMarks } from "./ticks.js";

/** @typedef {import("./types.js").Series} Series */
/** @typedef {import("./types.js").Collective} Collective */
/** @typedef {import("./graph.js").GraphData} GraphData */

const HEIGHT = 104, LEFT = 64, RIGHT = 12, TOP = 18, BOTTOM = 18;
// Collective marks under the axis: each GAP wide (its hit area), in rows ROW high, at most MARK_ROWS rows
// (past that, marks of one step fan out to the right): several issued at one step stay apart (ticks.js).
const GAP = 8, ROW = 8, MARK_ROWS = 4;

/**
 * The first series the viewer can draw, or null.
 * @param {Series[] | undefined} list
 * @returns {Series | null}
 */
export function drawableSeries(list) {
  for (const s of list || []) {
    if (s && Array.isArray(s.values) && s.values.length && s.values.every((v) => typeof v === "number" && isFinite(v))) return s;
  }
  return null;
}

/**
 * The series drawn beside `series` (its `of` is series.key, one number or null per step), or null.
 * @param {Series[] | undefined} list
 * @param {Series} series
 * @returns {Series | null}
 */
export function companionSeries(list, series) {
  for (const s of list || []) {
    if (s && s !== series && s.of === series.key && Array.isArray(s.values) && s.values.length === series.values.length &&
        s.values.every((v) => v === null || (typeof v === "number" && isFinite(v)))) return s;
  }
  return null;
}

/**
 * The collectives of `series` that can be marked: a string op, a byte count and a step on the chart.
 * @param {Series} series
 * @returns {Collective[]}
 */
export function chartEvents(series) {
  const n = series.values.length;
  return (Array.isArray(series.events) ? series.events : []).filter((e) => e && typeof e.op === "string" &&
    typeof e.bytes === "number" && Number.isInteger(e.step) && e.step >= 0 && e.step < n);
}

export class StepChart {
  // series: {label, unit, x_label, values, node_step, peak, peak_label}; graph: GraphData; onPick(step);
  // other: the series beside it ({label, values, peak, peak_bytes}), or null.
  /**
   * @param {HTMLElement} parent
   * @param {HTMLElement} before
   * @param {Series} series
   * @param {GraphData} graph
   * @param {(step: number, node: number) => void} onPick
   * @param {Series | null} other
   */
  constructor(parent, before, series, graph, onPick, other) {
    this.s = series;
    this.o = other || null;
    this.graph = graph;
    this.onPick = onPick;
    this.n = series.values.length;
    this.peak = Number.isInteger(series.peak) && series.peak >= 0 && series.peak < this.n ? series.peak : this._argmax();
    this.max = Math.max(series.values[this._argmax()], 0) || 1;
    if (this.o) {
      for (const v of this.o.values) if (v !== null && v > this.max) this.max = v;
      const p = this.o.peak;
      this.oPeak = Number.isInteger(p) && p >= 0 && p < this.n && this.o.values[p] !== null ? p : -1;
    }
    this.stepNode = new Int32Array(this.n).fill(-1);
    const ns = Array.isArray(series.node_step) ? series.node_step : [];
    for (let i = 0; i < ns.length && i < graph.n; i++) if (ns[i] >= 0 && ns[i] < this.n) this.stepNode[ns[i]] = i;
    /** The step node i runs at, -1 for none. @param {number} i @returns {number} */
    this.nodeStep = (i) => (i >= 0 && i < ns.length && ns[i] >= 0 && ns[i] < this.n ? ns[i] : -1);
    this.selected = -1;
    this.events = chartEvents(series);
    this.hoverText = h("span", { class: "gv-chart-hover", "data-testid": "viewer-chart-hover" });
    const head = h("div", { class: "gv-chart-head" },
      h("span", { class: "gv-chart-title", text: `${series.label || "series"} · ` }),
      h("span", { class: "gv-chart-peak-text", "data-testid": "viewer-chart-peak-text", text: this._peakText() }),
      this.hoverText);
    this.root = h("div", { class: "gv-chart", "data-testid": "viewer-chart" }, head);
    if (this.o) {
      this.root.appendChild(h("div", { class: "gv-chart-legend", "data-testid": "viewer-chart-legend" },
        h("span", { class: "gv-chart-key gv-chart-key-predicted" }), h("span", { text: "predicted" }),
        h("span", { class: "gv-chart-key gv-chart-key-measured" }), h("span", { text: "measured" }),
        h("span", { class: "gv-chart-legend-peak", "data-testid": "viewer-chart-measured-peak-text",
                    text: ` · ${this._otherPeakText()}` })));
    }
    if (this.events.length) {
      this.root.appendChild(h("div", { class: "gv-chart-note", "data-testid": "viewer-chart-collectives",
                                       text: `${this.events.length.toLocaleString()} collective(s) marked ▾` }));
    }
    if (Array.isArray(series.notes) && series.notes.length) {
      this.root.appendChild(h("div", { class: "gv-chart-note", text: series.notes.join(" · ") }));
    }
    this.svg = el("svg", { class: "gv-chart-svg", height: String(HEIGHT), width: "100%",
                           "aria-label": series.label || "chart", role: "img" }, this.root);
    parent.insertBefore(this.root, before);
    this.svg.addEventListener("mousemove", (ev) => {
      const mark = /** @type {Element} */ (ev.target).closest?.("[data-mark]");
      if (mark) this._hoverMark(+mark.getAttribute("data-mark"));
      else this._hover(this._stepAt(ev));
    });
    this.svg.addEventListener("mouseleave", () => this._hover(-1));
    this.svg.addEventListener("click", (ev) => {
      const target = /** @type {Element} */ (ev.target);
      const peak = target.closest && target.closest("[data-step]");
      const step = peak ? +peak.getAttribute("data-step") : this._stepAt(ev);
      if (step >= 0) this.onPick(step, this.stepNode[step]);
    });
    if (window.ResizeObserver) {
      let last = -1;
      new ResizeObserver(() => { const w = this.svg.clientWidth; if (w !== last) { last = w; this.draw(); } }).observe(this.svg);
    }
    this.draw();
  }
  _argmax() {
    let best = 0;
    for (let k = 1; k < this.n; k++) if (this.s.values[k] > this.s.values[best]) best = k;
    return best;
  }
  /** @param {number} k */
  _value(k) { return format(this.s.values[k], this.s.unit); }
  // The second series at step k, in words ("not measured" where it has no value).
  /** @param {number} k */
  _otherValue(k) {
    const v = this.o.values[k];
    return v === null ? "not measured" : format(v, this.s.unit);
  }
  _otherPeak() { return typeof this.o.peak_bytes === "number" ? this.o.peak_bytes : this.o.values[this.oPeak]; }
  _otherPeakText() {
    if (this.oPeak < 0) return `${this.o.label || "second series"}: no peak step`;
    const peak = format(this._otherPeak(), this.s.unit), node = this.stepNode[this.oPeak];
    if (this.o.values[this.oPeak] < this._otherPeak()) return `measured peak ${peak} during the forward`;
    return `measured peak ${peak} at step ${this.oPeak.toLocaleString()}` +
      (node >= 0 ? ` (${this.graph.name(node)})` : " (the end of the forward)");
  }
  _peakText() {
    const node = this.stepNode[this.peak];
    return `peak ${this._value(this.peak)} at step ${this.peak.toLocaleString()}` +
      (node >= 0 ? ` (${this.graph.name(node)})` : " (the end of the forward)");
  }
  /** @param {number} k */
  _stepText(k) {
    const node = this.stepNode[k];
    return `step ${k.toLocaleString()}: ${node >= 0 ? this.graph.name(node) + " " + this.graph.id(node) : "the end of the forward"}` +
      (this.o ? ` · predicted ${this._value(k)} · measured ${this._otherValue(k)}` : ` · ${this._value(k)}`) +
      this.events.filter((e) => e.step === k).map((e) => " · " + collectiveText(e)).join("");
  }
  // Plot geometry for the current width: columns of steps (several steps per column when they outnumber pixels).
  _geometry() {
    const width = Math.max(160, this.svg.clientWidth || 600);
    const plotW = width - LEFT - RIGHT;
    const cols = Math.max(1, Math.min(this.n, Math.floor(plotW)));
    return { width, plotW, cols, colW: plotW / cols };
  }
  /** @param {number} k */
  _column(k) { return Math.min(this.g.cols - 1, Math.floor((k * this.g.cols) / this.n)); }
  /** The steps [a, b) of column c. @param {number} c @returns {[number, number]} */
  _range(c) { return [Math.floor((c * this.n) / this.g.cols), Math.max(Math.floor(((c + 1) * this.n) / this.g.cols), Math.floor((c * this.n) / this.g.cols) + 1)]; }
  /** @param {number} k */
  _x(k) { return LEFT + (this._column(k) + 0.5) * this.g.colW; }
  /** @param {number} v */
  _y(v) { return TOP + (HEIGHT - TOP - BOTTOM) * (1 - v / this.max); }
  // The step under the pointer: the largest in its column, so a narrow peak can be hovered and clicked.
  /** @param {MouseEvent} ev */
  _stepAt(ev) {
    const r = this.svg.getBoundingClientRect();
    const c = Math.floor((ev.clientX - r.left - LEFT) / this.g.colW);
    if (c < 0 || c >= this.g.cols) return -1;
    const [a, b] = this._range(c);
    let best = a;
    for (let k = a + 1; k < b && k < this.n; k++) if (this.s.values[k] > this.s.values[best]) best = k;
    return best;
  }
  draw() {
    this.g = this._geometry();
    const { width, cols, colW } = this.g, svg = this.svg, v = this.s.values, base = this._y(0);
    const marks = placeMarks(this.events.map((e) => this._x(e.step)), GAP, MARK_ROWS);
    const height = HEIGHT + Math.max(0, marks.rows - 1) * ROW;  // rows of marks below the first push the labels down
    svg.replaceChildren();
    svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
    svg.setAttribute("height", String(height));
    let d = `M${LEFT},${base}`;
    for (let c = 0; c < cols; c++) {
      const [a, b] = this._range(c);
      let top = v[a];
      for (let k = a + 1; k < b && k < this.n; k++) if (v[k] > top) top = v[k];
      d += `V${this._y(top).toFixed(1)}H${(LEFT + (c + 1) * colW).toFixed(1)}`;
    }
    el("path", { class: "gv-chart-area", "data-testid": "viewer-chart-predicted", d: d + `V${base}Z` }, svg);
    if (this.o) el("path", { class: "gv-chart-line", "data-testid": "viewer-chart-measured", d: this._otherPath() }, svg);
    el("line", { class: "gv-chart-axis", x1: LEFT, x2: width - RIGHT, y1: base, y2: base }, svg);
    /** @param {number} x @param {number} y @param {string} t @param {string} anchor @param {string} [cls] */
    const label = (x, y, t, anchor, cls) => {
      const e = el("text", { x, y, "text-anchor": anchor, class: cls || "gv-chart-label" }, svg);
      e.textContent = t;
      return e;
    };
    label(LEFT - 4, TOP + 4, format(this.max, this.s.unit), "end");
    label(LEFT - 4, base, "0", "end");
    label(LEFT, height - 4, "0", "start");
    label(width - RIGHT, height - 4, (this.n - 1).toLocaleString(), "end");
    label(LEFT + (width - LEFT - RIGHT) / 2, height - 4, this.s.x_label || "step", "middle");
    this.selLine = el("line", { class: "gv-chart-sel", y1: TOP - 4, y2: base, visibility: "hidden" }, svg);
    this.hoverLine = el("line", { class: "gv-chart-hover-line", y1: TOP - 4, y2: base, visibility: "hidden" }, svg);
    const px = this._x(this.peak), py = this._y(v[this.peak]);
    const peak = el("g", { class: "gv-chart-peak", "data-testid": "viewer-chart-peak", "data-step": String(this.peak) }, svg);
    const hit = Math.max(colW, 14);  // the whole column, at least a finger wide
    el("rect", { class: "gv-chart-hit", x: px - hit / 2, y: TOP - 12, width: hit, height: base - TOP + 12 }, peak);
    el("line", { x1: px, x2: px, y1: py, y2: base }, peak);
    el("circle", { cx: px, cy: py, r: 5 }, peak);
    const t = el("text", { x: px + (px > width / 2 ? -8 : 8), y: Math.max(TOP - 5, py - 6), class: "gv-chart-peak-label",
                           "text-anchor": px > width / 2 ? "end" : "start", "data-testid": "viewer-chart-peak-label" }, peak);
    t.textContent = `peak ${this._value(this.peak)}`;
    if (this.o && this.oPeak >= 0) this._otherPeakMark(px, t);
    this._collectiveMarks(base, marks);
    this.highlight(this.selected);
  }
  // A rank's collectives: a tick under the axis at the step where each was issued, its op and bytes as its title;
  // those issued at one step (or in one column) stacked in rows, then fanned right, so each can be seen and hovered.
  /** @param {number} base @param {{places: import("./ticks.js").MarkPlace[], rows: number}} marks */
  _collectiveMarks(base, { places, rows }) {
    const tall = rows > 1 ? ROW : BOTTOM - 4;  // one row: the whole band under the axis is its hit area
    this.events.forEach((e, j) => {
      const { row, x } = places[j], y = base + row * ROW;
      const mark = el("g", { class: "gv-chart-collective", "data-testid": "viewer-chart-collective",
                             "data-step": String(e.step), "data-op": e.op, "data-mark": String(j),
                             "data-row": String(row) }, this.svg);
      el("rect", { class: "gv-chart-hit", x: x - GAP / 2, y, width: GAP, height: tall }, mark);
      el("line", { x1: x, x2: x, y1: y + 1, y2: y + ROW - 2 }, mark);
      el("title", {}, mark).textContent = this._markText(e);
    });
  }
  /** @param {Collective} e */
  _markText(e) { return collectiveText(e) + ` at step ${e.step.toLocaleString()}`; }
  // Hovering mark j: its own op and bytes, and its step's node.
  /** @param {number} j */
  _hoverMark(j) {
    const e = this.events[j];
    if (!e) return;
    this._hover(e.step);
    const node = this.stepNode[e.step];
    this.hoverText.textContent = ` · ${this._markText(e)}` +
      (node >= 0 ? ` (${this.graph.name(node)} ${this.graph.id(node)})` : " (the end of the forward)");
    this.root.dataset.hoverMark = String(j);
  }
  // The second series as a line of steps, broken where it has no value.
  _otherPath() {
    const v = this.o.values, { cols, colW } = this.g;
    let d = "", open = false;
    for (let c = 0; c < cols; c++) {
      const [a, b] = this._range(c);
      let top = null;
      for (let k = a; k < b && k < this.n; k++) if (v[k] !== null && (top === null || v[k] > top)) top = v[k];
      if (top === null) { open = false; continue; }
      const y = this._y(top).toFixed(1), x0 = (LEFT + c * colW).toFixed(1), x1 = (LEFT + (c + 1) * colW).toFixed(1);
      d += (open ? `V${y}` : `M${x0},${y}`) + `H${x1}`;
      open = true;
    }
    return d || `M${LEFT},${this._y(0)}`;
  }
  // The second series' peak: a ring and its label, below the first's label when the two would meet.
  /** @param {number} px @param {SVGElement} first */
  _otherPeakMark(px, first) {
    const width = this.g.width, k = this.oPeak, mx = this._x(k), my = this._y(this.o.values[k]);
    const mark = el("g", { class: "gv-chart-measured-peak", "data-testid": "viewer-chart-measured-peak",
                           "data-step": String(k) }, this.svg);
    el("circle", { cx: mx, cy: my, r: 4 }, mark);
    const right = mx > width / 2;
    const firstY = +first.getAttribute("y");
    let y = Math.max(TOP - 5, my - 6);
    if (Math.abs(mx - px) < 160 && Math.abs(y - firstY) < 12) y = firstY + 12;
    const t = el("text", { x: mx + (right ? -8 : 8), y, class: "gv-chart-measured-label", "text-anchor": right ? "end" : "start",
                           "data-testid": "viewer-chart-measured-peak-label" }, mark);
    t.textContent = `measured peak ${format(this._otherPeak(), this.s.unit)}` +
      (this.o.values[k] < this._otherPeak() ? " (in the forward)" : "");
  }
  /** @param {number} k */
  _hover(k) {
    delete this.root.dataset.hoverMark;
    if (k < 0) {
      this.hoverLine.setAttribute("visibility", "hidden");
      this.hoverText.textContent = "";
      return;
    }
    const x = String(this._x(k));
    this.hoverLine.setAttribute("x1", x);
    this.hoverLine.setAttribute("x2", x);
    this.hoverLine.setAttribute("visibility", "visible");
    this.hoverText.textContent = " · " + this._stepText(k);
    this.root.dataset.hoverStep = String(k);
  }
  // Mark step k (-1: none) as the selected node's.
  /** @param {number} k */
  highlight(k) {
    this.selected = k;
    this.root.dataset.selectedStep = String(k);
    if (!this.selLine) return;
    if (k < 0) { this.selLine.setAttribute("visibility", "hidden"); return; }
    const x = String(this._x(k));
    this.selLine.setAttribute("x1", x);
    this.selLine.setAttribute("x2", x);
    this.selLine.setAttribute("visibility", "visible");
  }
  // Details rows for node i: its step and the live bytes then (predicted and measured, with a second series).
  /** @param {number} i @returns {[string, string][]} */
  rows(i) {
    const k = this.nodeStep(i);
    if (k < 0) return collectiveRows(this.events, i);
    /** @type {[string, string]} */
    const step = ["backward step", `${k.toLocaleString()} of ${(this.n - 1).toLocaleString()}` + (k === this.peak ? " (the peak)" : "")];
    if (!this.o) return [step, [this.s.label || "value", this._value(k)], ...collectiveRows(this.events, i)];
    return [step, [`${this.s.label || "value"}, predicted`, this._value(k)],
      [`${this.s.label || "value"}, measured`, this._otherValue(k) + (k === this.oPeak ? " (the measured peak)" : "")],
      ...collectiveRows(this.events, i)];
  }
}
