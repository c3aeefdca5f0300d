// The payload: base64 text of gzipped JSON (see graphviz_app/viewer/__init__.py for its contract).
export const FORMAT = "graphviz-app-viewer";
export const VERSION = 1;
export const MAX_ENCODED_CHARS = 200 * 1024 * 1024;

export async function decodePayload(text) {
  const b64 = (text || "").trim();
  if (!b64) throw new Error("the viewer found no graph data in this page");
  if (b64.length > MAX_ENCODED_CHARS) throw new Error(`the graph data is ${b64.length.toLocaleString()} characters, more than this viewer reads`);
  let binary;
  try {
    binary = atob(b64);
  } catch (e) {
    throw new Error("the graph data is damaged (not base64): save the graph again");
  }
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  let json;
  try {
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    json = await new Response(stream).text();
  } catch (e) {
    throw new Error("the graph data is damaged (not gzip): save the graph again");
  }
  let data;
  try {
    data = JSON.parse(json);
  } catch (e) {
    throw new Error("the graph data is damaged (not JSON): save the graph again");
  }
  checkPayload(data);
  return data;
}

export function checkPayload(data) {
  if (!data || data.format !== FORMAT) throw new Error("this is not graphviz-app viewer data");
  if (data.version !== VERSION) {
    throw new Error(`the graph data is of viewer version ${data.version}; this viewer reads version ${VERSION}: save the graph again with this graphviz-app`);
  }
  const g = data.graph, t = data.tree;
  if (!g || g.schema !== 3 || !g.nodes || !g.edges || !t || !Array.isArray(t.parent)) {
    throw new Error("the graph data lacks its nodes, edges or boxes");
  }
  const n = g.nodes.kind.length;
  if (t.node_group.length !== n || t.node_instance.length !== n) throw new Error("the graph's boxes do not match its nodes");
}
