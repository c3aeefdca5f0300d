// The graph viewer: the server-drawn Graphviz SVG with zoom and pan.
// Buttons or Ctrl+wheel zoom (around the pointer); dragging pans.
const STEP = 1.25;
const MIN_SCALE = 0.05;
const MAX_SCALE = 8;
const MIN_FIT = 0.6;

export default function (component) {
  const { parentElement, data } = component;
  const root = parentElement.querySelector(".gv-viewer");
  if (!root || !data) return;
  const pane = root.querySelector(".gv-pane");
  if (root.dataset.svgKey !== data.key) {
    root.dataset.svgKey = data.key;
    pane.innerHTML = data.svg;
    setup(root, pane);
  }
}

function setup(root, pane) {
  const svg = pane.querySelector("svg");
  if (!svg) return;
  const box = svg.viewBox.baseVal;
  const natural = { w: box && box.width ? box.width : svg.getBBox().width,
                    h: box && box.height ? box.height : svg.getBBox().height };
  const label = root.querySelector(".gv-scale");
  let scale = 1;
  const apply = (next, cx, cy) => {
    const old = scale;
    scale = Math.min(MAX_SCALE, Math.max(MIN_SCALE, next));
    svg.setAttribute("width", natural.w * scale);
    svg.setAttribute("height", natural.h * scale);
    label.textContent = Math.round(scale * 100) + "%";
    if (cx !== undefined) {  // keep the point under the pointer still
      pane.scrollLeft = (pane.scrollLeft + cx) * (scale / old) - cx;
      pane.scrollTop = (pane.scrollTop + cy) * (scale / old) - cy;
    }
  };
  // Fit the width, but never so small that labels cannot be read: scroll instead.
  const fit = () => apply(Math.max(MIN_FIT, Math.min(1, (pane.clientWidth - 8) / natural.w)));
  root.querySelector(".gv-in").onclick = () => apply(scale * STEP);
  root.querySelector(".gv-out").onclick = () => apply(scale / STEP);
  root.querySelector(".gv-fit").onclick = fit;
  root.querySelector(".gv-one").onclick = () => apply(1);
  pane.onwheel = (event) => {
    if (!(event.ctrlKey || event.metaKey)) return;
    event.preventDefault();
    const r = pane.getBoundingClientRect();
    apply(scale * (event.deltaY < 0 ? STEP : 1 / STEP), event.clientX - r.left, event.clientY - r.top);
  };
  let drag = null;
  pane.onpointerdown = (event) => {
    drag = { x: event.clientX, y: event.clientY, left: pane.scrollLeft, top: pane.scrollTop };
    pane.classList.add("gv-dragging");
  };
  pane.onpointermove = (event) => {
    if (!drag) return;
    pane.scrollLeft = drag.left - (event.clientX - drag.x);
    pane.scrollTop = drag.top - (event.clientY - drag.y);
  };
  pane.onpointerup = pane.onpointerleave = () => {
    drag = null;
    pane.classList.remove("gv-dragging");
  };
  fit();
}
