// @ts-check
// The entry points: mount(element, payloadText, options) draws one graph in `element`;
// mountCompare(element, compareText, options) two graphs side by side, in step.
import { decodeCompare } from "./compare.js";
import { decodePayload } from "./decode.js";
import { viz } from "./layout.js";
import { mountPanes } from "./panes.js";
import { Viewer } from "./viewer.js";
import { layoutWorker, serveLayouts } from "./worker.js";

// Loaded in a Web Worker (no document): this bundle is the page's layout worker.
const inWorker = typeof document === "undefined" && typeof self !== "undefined";
if (inWorker) serveLayouts(/** @type {any} */ (self));
// The bundle's own text, read while it runs as the page's inline script: a worker starts from it.
const SOURCE = !inWorker && document.currentScript ? document.currentScript.textContent : null;

/** @typedef {import("./viewer.js").ViewerOptions} ViewerOptions */

/**
 * Draw the graph of `payloadText` (base64 of gzipped JSON) in `element`; on bad data, say why there.
 * @param {HTMLElement} element
 * @param {string} payloadText
 * @param {ViewerOptions} [options]
 * @returns {Promise<Viewer | null>}
 */
export async function mount(element, payloadText, options) {
  try {
    const [data, vizInstance] = await Promise.all([decodePayload(payloadText), viz()]);
    return new Viewer(element, data, vizInstance, { worker: () => layoutWorker(SOURCE), ...(options || {}) });
  } catch (e) {
    return failed(element, e);
  }
}

/**
 * Draw the two graphs of `compareText` (base64 of gzipped compare JSON) side by side in `element`.
 * @param {HTMLElement} element
 * @param {string} compareText
 * @param {ViewerOptions} [options]
 * @returns {Promise<ReturnType<typeof mountPanes> | null>}
 */
export async function mountCompare(element, compareText, options) {
  try {
    const [data, vizInstance] = await Promise.all([decodeCompare(compareText), viz()]);
    return mountPanes(element, data, vizInstance, { worker: () => layoutWorker(SOURCE), ...(options || {}) });
  } catch (e) {
    return failed(element, e);
  }
}

/** Say in `element` why nothing is shown. @param {HTMLElement} element @param {unknown} e @returns {null} */
function failed(element, e) {
  const box = document.createElement("div");
  box.className = "gv-error";
  box.setAttribute("data-testid", "viewer-error");
  box.textContent = "Could not show the graph: " + (e instanceof Error ? e.message : String(e));
  element.replaceChildren(box);
  element.dataset.state = "error";
  return null;
}
