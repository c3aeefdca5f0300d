// The page's graph viewer: the bundle of graphviz_app/viewer (loaded once per page by the
// graphviz_app.viewer_library component, which sets window.GraphvizAppViewer) mounted once per graph.
// Opening boxes, search and details happen here, in the browser; the page only hears of the view
// (open boxes, selection, colouring) for its link. `data.mount` "mountCompare": two graphs in synced panes.
const REPORT_MS = 250;
const LOADED = "graphviz-app-viewer-loaded";

function library() {
  if (window.GraphvizAppViewer) return Promise.resolve(window.GraphvizAppViewer);
  return new Promise((resolve) => window.addEventListener(LOADED, () => resolve(window.GraphvizAppViewer), { once: true }));
}

export default function (component) {
  const { parentElement, data, setStateValue } = component;
  const root = parentElement.querySelector(".gv-page");
  if (!root || !data || typeof data.payload !== "string") return;
  if (root.dataset.payloadKey === data.key) return;  // the same graph: a rerun of the page
  root.dataset.payloadKey = data.key;
  const host = document.createElement("div");
  host.className = "gv-host";
  root.replaceChildren(host);  // a viewer still starting for an older graph draws into a detached host
  let ready = false, last = null, timer = null;
  const report = (fragment) => {
    const hash = fragment.replace(/^#/, "");
    if (!ready || hash === last) return;
    last = hash;
    clearTimeout(timer);
    timer = setTimeout(() => setStateValue("view", hash), REPORT_MS);
  };
  const started = (shown) => {  // the view it opened on is not a change the person made
    last = (shown.dataset.view || "").replace(/^#/, "");
    ready = true;
  };
  if (data.mount === "mountCompare") {  // two graphs in synced panes: the first pane's view is the pair's
    library().then((lib) => lib.mountCompare(host, data.payload, { focus: false, fragment: data.fragment || "", onView: report }))
      .then((shown) => { if (shown) started(shown.panes[0].root); });
    return;
  }
  library().then((lib) => lib.mount(host, data.payload, { fragment: data.fragment || "", onView: report })).then((viewer) => {
    if (viewer) started(viewer.root);
  });
}
