// @ts-check
// The entry point: mount(element, payloadText, options) draws one graph in `element`.
import { decodePayload } from "./decode.js";
import { viz } from "./layout.js";
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
    const box = document.createElement("div");
    box.className = "gv-error";
    box.setAttribute("data-testid", "viewer-error");
    box.textContent = "Could not show the graph: " + (e instanceof Error ? e.message : String(e));
    element.replaceChildren(box);
    element.dataset.state = "error";
    return null;
  }
}
