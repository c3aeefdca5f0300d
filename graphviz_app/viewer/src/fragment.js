// The view in the URL fragment: open boxes, shown instances, the selected node, the colouring.
// #open=0.3.7&inst=7:2&sel=n42&color=gradient  (boxes by their numbers in the graph data)
export function readFragment(hash, tree, graph, overlayKeys) {
  const view = { open: null, inst: new Map(), sel: null, color: null, query: null };
  const params = new URLSearchParams((hash || "").replace(/^#/, ""));
  const G = tree.parent.length;
  const group = (s) => (/^\d+$/.test(s) && +s < G ? +s : null);
  if (params.has("open")) view.open = params.get("open").split(".").map(group).filter((g) => g !== null);
  for (const pair of (params.get("inst") || "").split(".")) {
    const [g, k] = pair.split(":");
    if (group(g) !== null && /^\d+$/.test(k || "") && +k < Math.max(1, tree.count[+g])) view.inst.set(+g, +k);
  }
  const sel = params.get("sel");
  if (sel && graph.indexOf(sel) >= 0) view.sel = graph.indexOf(sel);
  const color = params.get("color");
  if (color && (color === "kind" || overlayKeys.includes(color))) view.color = color;
  const q = params.get("q");
  if (q) view.query = q.slice(0, 200);
  return view;
}

export function writeFragment(tree, graph, state) {
  const parts = ["open=" + [...tree.open].sort((a, b) => a - b).join(".")];
  const inst = [...tree.selected].filter(([, k]) => k).map(([g, k]) => `${g}:${k}`);
  if (inst.length) parts.push("inst=" + inst.join("."));
  if (state.sel !== null) parts.push("sel=" + encodeURIComponent(graph.id(state.sel)));
  if (state.color && state.color !== "kind") parts.push("color=" + encodeURIComponent(state.color));
  return "#" + parts.join("&");
}
