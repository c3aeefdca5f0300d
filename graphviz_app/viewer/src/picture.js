// @ts-check
// Pictures of the drawing: a standalone SVG (every style written on its element, no script, no link,
// names as escaped text) and a PNG drawn from it, of what is on screen or of the whole drawing.

/** @typedef {{x: number, y: number, w: number, h: number}} Rect */

// The styles the stylesheet gives the drawing, written onto each element of the copy.
const STYLES = ["fill", "fill-opacity", "stroke", "stroke-width", "stroke-dasharray", "stroke-opacity", "opacity",
  "font-family", "font-size", "font-weight", "font-style", "text-anchor", "visibility"];
// What a picture may hold: the drawing's own elements and attributes, nothing that runs or fetches.
const ELEMENTS = new Set(["svg", "g", "defs", "marker", "rect", "path", "text", "circle", "line", "title"]);
const ATTRIBUTES = /^(id|class|x|y|x1|x2|y1|y2|cx|cy|r|rx|ry|d|width|height|transform|viewBox|refX|refY|markerWidth|markerHeight|orient|marker-end|fill|fill-opacity|stroke|stroke-width|stroke-dasharray|stroke-opacity|opacity|font-family|font-size|font-weight|font-style|text-anchor|visibility|data-[a-z-]+)$/;
const NS = "http://www.w3.org/2000/svg";

/**
 * Copy `from`'s computed styles onto `to` as attributes (those its parent's copy does not pass down
 * already), and drop what a picture may not hold.
 * @param {Element} from  an element of the drawing on the page
 * @param {Element} to  its copy
 * @param {Map<string, string>} inherited  the styles the parent's copy has
 * @returns {Map<string, string>} the styles `to` has
 */
function inline(from, to, inherited) {
  const style = getComputedStyle(from), own = new Map();
  for (const name of STYLES) {
    const value = style.getPropertyValue(name);
    own.set(name, value);
    if (value === inherited.get(name) && name !== "opacity") continue;
    if (name === "opacity" && value === "1") continue;
    if (value) to.setAttribute(name, value);
  }
  for (const a of [...to.attributes]) {
    const local = a.name === "marker-end" && /^url\(#[\w-]+\)$/.test(a.value);
    if (!ATTRIBUTES.test(a.name) || (/url\(/i.test(a.value) && !local) || /javascript:/i.test(a.value)) to.removeAttribute(a.name);
  }
  return own;
}

/**
 * A copy of `source` (an element of the drawing) keeping only allowed elements, styles inlined.
 * @param {Element} source
 * @param {(e: Element) => boolean} keep  whether a node or box element goes in
 * @param {Map<string, string>} [inherited]
 * @returns {Element | null}
 */
function copy(source, keep, inherited = new Map()) {
  if (!ELEMENTS.has(source.localName) || !keep(source)) return null;
  const out = /** @type {Element} */ (source.cloneNode(false));
  const own = inline(source, out, inherited);
  for (const child of source.childNodes) {
    if (child.nodeType === 3) out.appendChild(document.createTextNode(child.textContent || ""));
    else if (child.nodeType === 1) {
      const c = copy(/** @type {Element} */ (child), keep, own);
      if (c) out.appendChild(c);
    }
  }
  return out;
}

/**
 * The standalone SVG text of `region` (drawing coordinates) of the drawing in `svg`, `scale` px per unit.
 * @param {SVGSVGElement} svg  the viewer's picture: its defs (the arrowhead) and the drawn layers
 * @param {SVGGElement} viewport  the drawing
 * @param {Rect} region
 * @param {number} scale
 * @param {string} title
 * @returns {string}
 */
export function svgPicture(svg, viewport, region, scale, title) {
  const out = document.createElementNS(NS, "svg");
  const w = Math.max(1, Math.round(region.w * scale)), h = Math.max(1, Math.round(region.h * scale));
  out.setAttribute("width", String(w));
  out.setAttribute("height", String(h));
  out.setAttribute("viewBox", `${region.x} ${region.y} ${region.w} ${region.h}`);
  const name = document.createElementNS(NS, "title");
  name.textContent = title;
  out.appendChild(name);
  const back = document.createElementNS(NS, "rect");
  for (const [k, v] of Object.entries({ x: region.x, y: region.y, width: region.w, height: region.h })) back.setAttribute(k, String(v));
  back.setAttribute("fill", getComputedStyle(/** @type {Element} */ (svg.parentNode)).backgroundColor || "#ffffff");
  out.appendChild(back);
  for (const defs of svg.querySelectorAll("defs")) { const d = copy(defs, () => true); if (d) out.appendChild(d); }
  const visible = (/** @type {Element} */ e) => {
    if (!e.hasAttribute("data-node") && !e.hasAttribute("data-group")) return true;
    const r = /** @type {SVGGraphicsElement} */ (e).getBBox(), m = /** @type {SVGGraphicsElement} */ (e).transform.baseVal.consolidate();
    const x = r.x + (m ? m.matrix.e : 0), y = r.y + (m ? m.matrix.f : 0);
    return x < region.x + region.w && x + r.width > region.x && y < region.y + region.h && y + r.height > region.y;
  };
  const drawing = copy(viewport, visible);
  if (drawing) {
    drawing.removeAttribute("transform");
    out.appendChild(drawing);
  }
  return '<?xml version="1.0" encoding="UTF-8"?>\n' + new XMLSerializer().serializeToString(out);
}

/**
 * The PNG of an SVG picture `w` x `h` px, drawn `ratio` times as many pixels per side.
 * @param {string} svgText
 * @param {number} w
 * @param {number} h
 * @param {number} ratio
 * @returns {Promise<Blob>}
 */
export async function pngPicture(svgText, w, h, ratio) {
  const url = URL.createObjectURL(new Blob([svgText], { type: "image/svg+xml" }));
  try {
    const img = new Image();
    img.src = url;
    await img.decode();
    const canvas = document.createElement("canvas");
    canvas.width = Math.max(1, Math.round(w * ratio));
    canvas.height = Math.max(1, Math.round(h * ratio));
    const ctx = canvas.getContext("2d");
    ctx.drawImage(img, 0, 0, canvas.width, canvas.height);
    return await new Promise((resolve, reject) => canvas.toBlob((b) => (b ? resolve(b) : reject(new Error("the browser made no PNG"))), "image/png"));
  } finally {
    URL.revokeObjectURL(url);
  }
}

// A canvas side and area every browser draws (Chromium allows more; Firefox and Safari less).
export const MAX_SIDE = 16384, MAX_PIXELS = 64e6;

/**
 * How many PNG pixels per SVG pixel: `wanted`, less when the picture would be too big to draw.
 * @param {number} w @param {number} h @param {number} wanted
 * @returns {number}
 */
export function pngRatio(w, h, wanted) {
  return Math.min(wanted, MAX_SIDE / w, MAX_SIDE / h, Math.sqrt(MAX_PIXELS / (w * h)));
}

/**
 * A file name from a title: letters, digits, dots, dashes and underscores only.
 * @param {string} title @param {string} suffix
 * @returns {string}
 */
export function fileName(title, suffix) {
  const stem = (title || "graph").replace(/[^\w.-]+/g, "_").replace(/^[._]+|_+$/g, "").slice(0, 80) || "graph";
  return `${stem}.${suffix}`;
}

/**
 * Offer `blob` as a download named `name`.
 * @param {Blob} blob @param {string} name
 */
export function download(blob, name) {
  const a = document.createElement("a");
  a.href = URL.createObjectURL(blob);
  a.download = name;
  a.hidden = true;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 60_000);
}

/**
 * Save a picture: "view.svg", "drawing.svg", "view.png" or "drawing.png" (what is on screen, or all of it).
 * @param {{svg: SVGSVGElement, viewport: SVGGElement, panzoom: import("./panzoom.js").PanZoom,
 *          scene: import("./types.js").Scene, title: string}} from  the viewer's picture and view
 * @param {string} what
 * @returns {Promise<void>}
 */
export async function savePicture(from, what) {
  const [part, kind] = what.split(".");
  const pz = from.panzoom, { W, H } = pz.size();
  const view = part === "view";
  const region = view ? { x: -pz.tx / pz.k, y: -pz.ty / pz.k, w: W / pz.k, h: H / pz.k } :
    { x: -10, y: -10, w: from.scene.width + 20, h: from.scene.height + 20 };
  const scale = view ? pz.k : 1;
  const text = svgPicture(from.svg, from.viewport, region, scale, from.title || "autograd graph");
  const name = fileName(from.title || "graph", view ? `view.${kind}` : kind);
  if (kind === "svg") return download(new Blob([text], { type: "image/svg+xml" }), name);
  const w = region.w * scale, h = region.h * scale;
  download(await pngPicture(text, w, h, pngRatio(w, h, window.devicePixelRatio > 1 ? window.devicePixelRatio : 2)), name);
}
