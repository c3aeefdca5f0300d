// The graph viewer: the server-drawn Graphviz SVG with zoom, pan, an overview,
// search and a details panel. Everything here runs in the browser: the SVG is
// laid out once on the server and sent once per graph.
// It opens on the output end at a readable scale; "Fit" shows the whole graph.
const STEP = 1.25;
const MAX_SCALE = 8;
const READABLE = 0.6;  // below this labels cannot be read: open at this scale and scroll
const MINIMAP = 140;   // the overview's longest side, px
const DRAG_PX = 4;     // a pointer that moved less than this clicked

export default function (component) {
  const { parentElement, data, setTriggerValue } = component;
  const root = parentElement.querySelector(".gv-viewer");
  if (!root || !data) return;
  root._open = (name) => setTriggerValue("open", name);
  if (root.dataset.svgKey !== data.key) {
    root.dataset.svgKey = data.key;
    const pane = root.querySelector(".gv-pane");
    root.querySelector(".gv-details").hidden = true;
    // Measured before the new SVG is in: sizing it needs no layout of a big SVG.
    const width = pane.clientWidth;
    pane.innerHTML = data.svg;
    setup(root, data, width);
  }
}

function setup(root, data, width) {
  const pane = root.querySelector(".gv-pane");
  const svg = pane.querySelector("svg");
  if (!svg) return;
  const details = typeof data.details === "string" ? JSON.parse(data.details) : (data.details || {});
  const box = svg.viewBox.baseVal;
  const natural = { w: box && box.width ? box.width : svg.getBBox().width,
                    h: box && box.height ? box.height : svg.getBBox().height };
  const nodes = {};
  for (const g of svg.querySelectorAll("g.node")) {
    const title = g.querySelector("title");
    if (title) nodes[title.textContent] = g;
  }
  const view = { root, pane, svg, natural, nodes, details, scale: 1, width };
  const tall = () => natural.h * READABLE > window.innerHeight * 0.7;
  pane.classList.toggle("gv-tall", tall());
  const update = setupMinimap(view, data.svg);
  let pending = false;
  const minimap = () => {  // once per frame, after the browser has laid the SVG out anyway
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; update(); });
  };
  view.apply = (next, cx, cy) => {
    const old = view.scale;
    view.scale = Math.min(MAX_SCALE, Math.max(Math.min(fitScale(view), READABLE) * 0.5, next));
    svg.setAttribute("width", natural.w * view.scale);
    svg.setAttribute("height", natural.h * view.scale);
    root.querySelector(".gv-scale").textContent = Math.round(view.scale * 100) + "%";
    if (cx !== undefined) {  // keep the point under the pointer still
      pane.scrollLeft = (pane.scrollLeft + cx) * (view.scale / old) - cx;
      pane.scrollTop = (pane.scrollTop + cy) * (view.scale / old) - cy;
    }
    minimap();
  };
  const fit = () => {
    view.width = pane.clientWidth;  // the details panel may have taken some
    view.apply(Math.min(1, fitScale(view)));
  };
  const toOutput = () => {
    view.apply(Math.max(Math.min(1, fitScale(view)), Math.min(1, READABLE)));
    const ends = Object.keys(details).filter((id) => details[id].output && nodes[id]);
    const target = ends.length ? nodes[ends[0]] : lastNode(svg);
    if (target) centerOn(view, target);
  };
  root.querySelector(".gv-in").onclick = () => view.apply(view.scale * STEP);
  root.querySelector(".gv-out").onclick = () => view.apply(view.scale / STEP);
  root.querySelector(".gv-fit").onclick = fit;
  root.querySelector(".gv-one").onclick = () => view.apply(1);
  root.querySelector(".gv-end").onclick = toOutput;
  pane.onscroll = minimap;
  pane.onwheel = (event) => {
    if (!(event.ctrlKey || event.metaKey)) return;
    event.preventDefault();
    const r = pane.getBoundingClientRect();
    view.apply(view.scale * (event.deltaY < 0 ? STEP : 1 / STEP), event.clientX - r.left, event.clientY - r.top);
  };
  setupDrag(view);
  setupSearch(view);
  setupDetails(view);
  toOutput();
}

// The scale at which the whole graph fits the pane in both dimensions
// (a tall pane is 70vh high; its width is measured when the graph arrives and on Fit).
function fitScale(view) {
  const { natural } = view;
  return Math.min((view.width - 12) / natural.w, (window.innerHeight * 0.7 - 12) / natural.h);
}

// Without an output node, the last drawn node that is not the legend.
function lastNode(svg) {
  const all = [...svg.querySelectorAll("g.node")].filter((g) => {
    const title = g.querySelector("title");
    return !title || title.textContent !== "legend";
  });
  return all.length ? all[all.length - 1] : null;
}

// Scroll so that `el` (an SVG node group) is in the middle of the pane.
function centerOn(view, el) {
  const { pane } = view;
  const p = pane.getBoundingClientRect();
  const r = el.getBoundingClientRect();
  pane.scrollLeft += r.left + r.width / 2 - (p.left + pane.clientWidth / 2);
  pane.scrollTop += r.top + r.height / 2 - (p.top + pane.clientHeight / 2);
}

// The overview: the same SVG as an image, with the visible part outlined;
// shown only when the graph does not fit the pane. Click or drag on it to go there.
function setupMinimap(view, svgText) {
  const { root, pane, natural } = view;
  const mini = root.querySelector(".gv-minimap");
  const img = mini.querySelector("img");
  const frame = mini.querySelector(".gv-view");
  const k = MINIMAP / Math.max(natural.w, natural.h);
  mini.style.width = natural.w * k + "px";
  mini.style.height = natural.h * k + "px";
  if (img.src.startsWith("blob:")) URL.revokeObjectURL(img.src);
  img.removeAttribute("src");
  const update = () => {
    const over = pane.scrollWidth > pane.clientWidth + 2 || pane.scrollHeight > pane.clientHeight + 2;
    mini.hidden = !over;
    if (!over) return;
    if (!img.src) {  // drawn only when needed: a second rendering of a big SVG is not free
      img.src = URL.createObjectURL(new Blob([svgText], { type: "image/svg+xml" }));
    }
    const w = pane.scrollWidth, h = pane.scrollHeight;
    const mw = natural.w * k, mh = natural.h * k;
    frame.style.left = (pane.scrollLeft / w) * mw + "px";
    frame.style.top = (pane.scrollTop / h) * mh + "px";
    frame.style.width = Math.min(1, pane.clientWidth / w) * mw + "px";
    frame.style.height = Math.min(1, pane.clientHeight / h) * mh + "px";
  };
  const go = (event) => {
    const r = mini.getBoundingClientRect();
    pane.scrollLeft = ((event.clientX - r.left) / r.width) * pane.scrollWidth - pane.clientWidth / 2;
    pane.scrollTop = ((event.clientY - r.top) / r.height) * pane.scrollHeight - pane.clientHeight / 2;
  };
  let dragging = false;
  mini.onpointerdown = (event) => { dragging = true; go(event); event.stopPropagation(); };
  mini.onpointermove = (event) => { if (dragging) go(event); };
  mini.onpointerup = mini.onpointerleave = () => { dragging = false; };
  return update;
}

function setupDrag(view) {
  const { pane } = view;
  let drag = null;
  pane.onpointerdown = (event) => {
    drag = { x: event.clientX, y: event.clientY, left: pane.scrollLeft, top: pane.scrollTop, moved: false };
    pane.classList.add("gv-dragging");
  };
  pane.onpointermove = (event) => {
    if (!drag) return;
    const dx = event.clientX - drag.x, dy = event.clientY - drag.y;
    if (Math.abs(dx) + Math.abs(dy) > DRAG_PX) drag.moved = true;
    pane.scrollLeft = drag.left - dx;
    pane.scrollTop = drag.top - dy;
  };
  pane.onpointerup = pane.onpointerleave = () => {
    view.dragged = drag !== null && drag.moved;
    drag = null;
    pane.classList.remove("gv-dragging");
  };
}

// Find nodes by op name, tensor name, module or shape; Next (or Enter) goes to each.
function setupSearch(view) {
  const { root, nodes, details } = view;
  const input = root.querySelector(".gv-search");
  const count = root.querySelector(".gv-count");
  let matches = [], at = -1;
  const clear = () => {
    for (const g of root.querySelectorAll("g.gv-match, g.gv-current")) g.classList.remove("gv-match", "gv-current");
  };
  const find = () => {
    clear();
    const q = input.value.trim().toLowerCase();
    matches = q ? Object.keys(nodes).filter((id) => ((details[id] && details[id].search) || id).includes(q)) : [];
    at = -1;
    for (const id of matches) nodes[id].classList.add("gv-match");
    count.textContent = q ? (matches.length ? `${matches.length} found` : "none found") : "";
  };
  const next = () => {
    if (!matches.length) return;
    if (at >= 0) nodes[matches[at]].classList.remove("gv-current");
    at = (at + 1) % matches.length;
    nodes[matches[at]].classList.add("gv-current");
    if (view.scale < READABLE) view.apply(READABLE);
    centerOn(view, nodes[matches[at]]);
    count.textContent = `${at + 1} of ${matches.length}`;
  };
  input.oninput = find;
  input.onkeydown = (event) => { if (event.key === "Enter") { event.preventDefault(); next(); } };
  root.querySelector(".gv-next").onclick = next;
}

// Clicking a node shows what the model knows about it; clicking a module box opens it.
function setupDetails(view) {
  const { root, pane, nodes, details } = view;
  const aside = root.querySelector(".gv-details");
  const body = aside.querySelector(".gv-details-body");
  root.querySelector(".gv-close").onclick = () => { aside.hidden = true; };
  root.onkeydown = (event) => { if (event.key === "Escape") aside.hidden = true; };
  pane.addEventListener("click", (event) => {
    if (view.dragged) return;
    const g = event.target.closest && event.target.closest("g.node");
    if (!g) return;
    const id = g.querySelector("title") ? g.querySelector("title").textContent : "";
    const info = details[id];
    if (!info) return;
    for (const other of root.querySelectorAll("g.gv-selected")) other.classList.remove("gv-selected");
    nodes[id].classList.add("gv-selected");
    show(body, info, root);
    aside.hidden = false;
    if (info.module !== undefined && root._open) root._open(info.module);
  });
}

function show(body, info, root) {
  body.replaceChildren();
  const h = document.createElement("h4");
  h.textContent = info.title;
  const kind = document.createElement("div");
  kind.className = "gv-kind";
  kind.textContent = info.kind;
  const dl = document.createElement("dl");
  for (const [label, text] of info.rows) {
    const dt = document.createElement("dt");
    dt.textContent = label;
    const dd = document.createElement("dd");
    dd.textContent = text;
    dl.append(dt, dd);
  }
  body.append(h, kind, dl);
  if (info.module !== undefined) {
    const note = document.createElement("div");
    note.className = "gv-open";
    note.textContent = `Opening ${info.module || "the root module"} one level…`;
    body.append(note);
  }
}
