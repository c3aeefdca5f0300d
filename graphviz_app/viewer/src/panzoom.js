// @ts-check
// Pan (drag, wheel), zoom (buttons, Ctrl+wheel), fit, and the overview in the corner.
const MIN_K = 0.02, MAX_K = 6;
export const READABLE_K = 0.84;  // every label in the drawing is 12 px: at this scale at least 10 px on screen
const DRAG_PX = 4;

/** @typedef {import("./types.js").Box} Box */

/**
 * The scale at which a w x h drawing fits a W x H pane with a margin.
 * @param {number} W @param {number} H @param {number} w @param {number} h
 * @returns {number}
 */
export function fitScaleOf(W, H, w, h) { return Math.min(W / (w + 20), H / (h + 20)); }
/** @typedef {{x: number, y: number, w: number, h: number}} Rect */

export class PanZoom {
  /**
   * @param {HTMLElement} pane  what is dragged and wheeled
   * @param {SVGSVGElement} svg
   * @param {SVGGElement} viewport  what is moved and scaled
   * @param {HTMLCanvasElement} overview
   * @param {(k: number) => void} onScale
   */
  constructor(pane, svg, viewport, overview, onScale) {
    this.pane = pane; this.svg = svg; this.viewport = viewport; this.overview = overview; this.onScale = onScale;
    this.k = 1; this.tx = 0; this.ty = 0; this.w = 0; this.h = 0;
    /** @type {Map<string, Box>} */
    this.boxes = new Map();
    /** @type {((target: Element) => void) | null} */
    this.onClick = null;
    /** @type {((pz: PanZoom) => void) | null} told after every move or zoom (a compare file's other pane follows) */
    this.onMove = null;
    this._pointer();
    overview.addEventListener("pointerdown", (ev) => this._overview(ev));
    overview.addEventListener("pointermove", (ev) => { if (ev.buttons) this._overview(ev); });
  }
  /** The pane's size in px. @returns {{W: number, H: number}} */
  size() { return { W: this.pane.clientWidth || 800, H: this.pane.clientHeight || 600 }; }
  /** @param {number} w @param {number} h @param {Map<string, Box>} boxes */
  content(w, h, boxes) { this.w = w; this.h = h; this.boxes = boxes; this.apply(); }
  apply() {
    this.viewport.setAttribute("transform", `translate(${this.tx},${this.ty}) scale(${this.k})`);
    if (this.onScale) this.onScale(this.k);
    this._drawOverview();
    if (this.onMove) this.onMove(this);
  }
  /** @returns {number} */
  fitScale() { const { W, H } = this.size(); return fitScaleOf(W, H, this.w, this.h); }
  fit() {
    const { W, H } = this.size();
    this.k = Math.min(MAX_K, Math.min(1.5, this.fitScale()));
    this.tx = (W - this.w * this.k) / 2; this.ty = (H - this.h * this.k) / 2;
    this.apply();
  }
  // The opening view: the whole drawing when it is readable so, else readable and on `target` (the output end).
  /** @param {Box | null} target */
  opening(target) {
    if (this.fitScale() >= READABLE_K || !target) return this.fit();
    this.k = READABLE_K;
    this.centerOn(target);
  }
  /** Whether box b is wholly on screen. @param {Rect} b @returns {boolean} */
  shows(b) {
    const { W, H } = this.size();
    const x = b.x * this.k + this.tx, y = b.y * this.k + this.ty;
    return x >= 0 && y >= 0 && x + b.w * this.k <= W && y + b.h * this.k <= H;
  }
  /** @param {Rect} b */
  centerOn(b) {
    const { W, H } = this.size();
    this.tx = W / 2 - (b.x + b.w / 2) * this.k;
    this.ty = H / 2 - (b.y + b.h / 2) * this.k;
    this.apply();
  }
  /** @param {{x: number, y: number}} before @param {{x: number, y: number}} after */
  keepStill(before, after) {
    this.tx += (before.x - after.x) * this.k; this.ty += (before.y - after.y) * this.k;
    this.apply();
  }
  /** Zoom by a factor f about (cx, cy) in the pane (its centre by default). @param {number} f @param {number} [cx] @param {number} [cy] */
  zoomBy(f, cx, cy) {
    const { W, H } = this.size();
    const x = cx === undefined ? W / 2 : cx, y = cy === undefined ? H / 2 : cy;
    const k = Math.max(MIN_K, Math.min(MAX_K, this.k * f));
    this.tx = x - (x - this.tx) * (k / this.k); this.ty = y - (y - this.ty) * (k / this.k);
    this.k = k;
    this.apply();
  }
  _pointer() {
    /** @type {{x: number, y: number, tx: number, ty: number, moved: boolean, target: Element} | null} */
    let start = null;
    this.pane.addEventListener("pointerdown", (ev) => {
      if (ev.button !== 0) return;
      start = { x: ev.clientX, y: ev.clientY, tx: this.tx, ty: this.ty, moved: false, target: /** @type {Element} */ (ev.target) };
    });
    this.pane.addEventListener("pointermove", (ev) => {
      if (!start) return;
      const dx = ev.clientX - start.x, dy = ev.clientY - start.y;
      if (!start.moved && Math.hypot(dx, dy) < DRAG_PX) return;
      if (!start.moved) { start.moved = true; this.pane.setPointerCapture(ev.pointerId); }
      this.tx = start.tx + dx; this.ty = start.ty + dy;
      this.apply();
    });
    this.pane.addEventListener("pointerup", (ev) => {
      const s = start;
      start = null;
      if (s && !s.moved && this.onClick) this.onClick(s.target);
      if (s && s.moved) this.pane.releasePointerCapture(ev.pointerId);
    });
    this.pane.addEventListener("wheel", (ev) => {
      ev.preventDefault();
      const r = this.pane.getBoundingClientRect();
      if (ev.ctrlKey || ev.metaKey) this.zoomBy(Math.exp(-ev.deltaY / 300), ev.clientX - r.left, ev.clientY - r.top);
      else { this.tx -= ev.deltaX; this.ty -= ev.deltaY; this.apply(); }
    }, { passive: false });
  }
  _scaleOverview() {
    const c = this.overview;
    const s = Math.min(c.width / Math.max(1, this.w), c.height / Math.max(1, this.h));
    return { s, ox: (c.width - this.w * s) / 2, oy: (c.height - this.h * s) / 2 };
  }
  _drawOverview() {
    const c = this.overview, g = c.getContext("2d");
    if (!g) return;
    const { s, ox, oy } = this._scaleOverview();
    g.clearRect(0, 0, c.width, c.height);
    for (const [key, b] of this.boxes) {
      if (key === "g0") continue;
      g.fillStyle = b.open ? "rgba(90,110,160,0.10)" : key[0] === "g" ? "#b9c4dc" : "#9aa3b5";
      g.fillRect(ox + b.x * s, oy + b.y * s, Math.max(1, b.w * s), Math.max(1, b.h * s));
    }
    const { W, H } = this.size();
    g.strokeStyle = "#d33"; g.lineWidth = 1.5;
    g.strokeRect(ox + (-this.tx / this.k) * s, oy + (-this.ty / this.k) * s, (W / this.k) * s, (H / this.k) * s);
  }
  /** @param {PointerEvent} ev */
  _overview(ev) {
    const r = this.overview.getBoundingClientRect();
    const { s, ox, oy } = this._scaleOverview();
    const x = (ev.clientX - r.left - ox) / s, y = (ev.clientY - r.top - oy) / s;
    const { W, H } = this.size();
    this.tx = W / 2 - x * this.k; this.ty = H / 2 - y * this.k;
    this.apply();
  }
}
