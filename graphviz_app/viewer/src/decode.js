// @ts-check
// The payload: base64 text of gzipped JSON, its long columns packed (unpack.js) (see
// graphviz_app/viewer/__init__.py for its contract; its type is types.js's Payload, and checkPayload is where a decoded object becomes one).
import { base64Bytes, isColumn, unpackAll } from "./unpack.js";

/** @typedef {import("./types.js").Payload} Payload */

export const FORMAT = "graphviz-app-viewer";
export const VERSION = 1;
/** The version of a payload with packed columns (graphviz_app/viewer/packing.py's PACKED_VERSION). */
export const PACKED_VERSION = 2;
export const MAX_ENCODED_CHARS = 200 * 1024 * 1024;

/** @param {string} text @returns {Promise<Payload>} */
export async function decodePayload(text) {
  return checkPayload(await decodeJson(text));
}

/** The JSON object in `text` (base64 of gzip), not yet checked. @param {string} text @returns {Promise<unknown>} */
export async function decodeJson(text) {
  const b64 = (text || "").trim();
  if (!b64) throw new Error("the viewer found no graph data in this page");
  if (b64.length > MAX_ENCODED_CHARS) throw new Error(`the graph data is ${b64.length.toLocaleString()} characters, more than this viewer reads`);
  const bytes = base64Bytes(b64);
  let json;
  try {
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    json = await new Response(stream).text();
  } catch {
    throw new Error("the graph data is damaged (not gzip): save the graph again");
  }
  let data;
  try {
    data = JSON.parse(json);
  } catch {
    throw new Error("the graph data is damaged (not JSON): save the graph again");
  }
  return unpackAll(data);
}

/**
 * `data` as a Payload, after checking what the viewer cannot do without.
 * @param {unknown} raw
 * @returns {Payload}
 */
export function checkPayload(raw) {
  const data = /** @type {Payload} */ (raw);
  if (!data || data.format !== FORMAT) throw new Error("this is not graphviz-app viewer data");
  if (data.version !== VERSION && data.version !== PACKED_VERSION) {
    throw new Error(`the graph data is of viewer version ${data.version}; this viewer reads versions ${VERSION} and ${PACKED_VERSION}: save the graph again with this graphviz-app`);
  }
  const g = data.graph, t = data.tree;
  if (!g || g.schema !== 3 || !g.nodes || !g.edges || !t || !isColumn(t.parent)) {
    throw new Error("the graph data lacks its nodes, edges or boxes");
  }
  const n = g.nodes.kind.length;
  if (!isColumn(t.node_group) || !isColumn(t.node_instance) || t.node_group.length !== n || t.node_instance.length !== n) {
    throw new Error("the graph's boxes do not match its nodes");
  }
  for (const key of /** @type {const} */ (["kind", "label", "module", "instance", "count"])) {
    if (!isColumn(t[key]) || t[key].length !== t.parent.length) throw new Error(`the graph's boxes lack their ${key}`);
  }
  for (const key of /** @type {const} */ (["name", "module", "source", "tensor", "grad"])) {
    if (!isColumn(g.nodes[key]) || g.nodes[key].length !== n) throw new Error(`the graph's nodes lack their ${key}`);
  }
  const m = g.edges.src && g.edges.src.length;
  if (!isColumn(g.edges.src) || !isColumn(g.edges.dst) || g.edges.dst.length !== m) {
    throw new Error("the graph's edges lack their ends");
  }
  for (let e = 0; e < m; e++) {
    const a = g.edges.src[e], b = g.edges.dst[e];
    if (!Number.isInteger(a) || !Number.isInteger(b) || a < 0 || b < 0 || a >= n || b >= n) {
      throw new Error(`edge ${e} joins nodes ${a} and ${b}, but the graph has ${n} nodes: save the graph again`);
    }
  }
  if (data.overlays !== undefined && !Array.isArray(data.overlays)) throw new Error("the graph data's overlays are not a list");
  return data;
}
