"""The viewer as one self-contained HTML file: script, styles and the gzipped graph inline, no request made."""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..analysis.distributed import FsdpUnit, RankMemory
from ..analysis.memory import MeasuredMemory
from ..model import Graph
from .bundle import bundle_css, bundle_gzip, bundle_js
from .payload import UserOverlays, encode, payload

__all__ = ["CONTENT_SECURITY_POLICY", "MOUNTS", "FIT_MIN_HEIGHT", "FIT_MAX_HEIGHT", "viewer_html", "page_html",
           "standalone_page", "notebook_html", "notebook_cell"]

# A notebook cell's frame, once drawn, takes the height its drawing needs within these bounds (px); the page
# also keeps it under 85% of its own window's height, so a cell never outgrows the screen.
FIT_MIN_HEIGHT = 320
FIT_MAX_HEIGHT = 1200

# What a notebook cell's frame may start: one graph, or two in synced panes (`compare.compare_payload`).
MOUNTS = ("mount", "mountCompare")

# Nothing may be fetched: no default source at all; inline script and styles, WebAssembly compiled
# from the inline bundle (Graphviz's layout), pictures only from data: and blob: URLs (an exported PNG
# is drawn from a blob), the layout worker only from a blob: URL (the bundle's own text).
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'unsafe-inline' 'wasm-unsafe-eval'; style-src 'unsafe-inline'; "
    "img-src data: blob:; worker-src blob:; connect-src 'none'; base-uri 'none'; form-action 'none'"
)

_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{csp}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="graphviz-app">
<title>{title}</title>
<style>
html, body {{ margin: 0; height: 100%; }}
#gv-root {{ height: 100vh; box-sizing: border-box; padding: 6px; }}
{css}
</style>
</head>
<body>
<div id="gv-root"></div>
<script type="application/octet-stream" id="gv-payload">{data}</script>
<script>{js}</script>
<script>
{mount}
</script>
</body>
</html>
"""

# One graph: the view travels in the address's fragment, so a link reopens it.
_MOUNT_ONE = """GraphvizAppViewer.mount(document.getElementById("gv-root"),
  document.getElementById("gv-payload").textContent,
  {fragment: location.hash, focus: window.top === window, onView: function (hash) {
    try { history.replaceState(null, "", hash); } catch (e) { /* a sandboxed frame keeps no history */ }
  }});"""


def page_html(data: Mapping[str, Any]) -> str:
    """An HTML page showing the viewer payload `data` (see `payload.payload`).

    The title is escaped; the payload is base64 text, which holds no character HTML reads as markup.
    """
    return standalone_page(encode(data), title=str(data.get("title", "autograd graph")), mount=_MOUNT_ONE)


def standalone_page(encoded: str, *, title: str, mount: str) -> str:
    """The self-contained page around an encoded payload (`payload.encode`): the bundle's script and styles
    inline, the policy that lets nothing be fetched, and `mount`, the script (ours, never data) that starts
    the viewer on the payload. The title is escaped.

    Raises:
        RenderError: the viewer's bundle is not built.
    """
    return _PAGE.format(csp=CONTENT_SECURITY_POLICY, title=html.escape(title), css=bundle_css(), data=encoded,
                        js=bundle_js(), mount=mount)


def viewer_html(graph: Graph, *, title: str = "autograd graph", rankdir: str = "TB",
                measured: MeasuredMemory | None = None, overlays: UserOverlays | None = None,
                rank: RankMemory | None = None, units: Sequence[FsdpUnit] = ()) -> str:
    """`graph` in the interactive viewer, as the text of one self-contained HTML file.

    `measured`: a measurement of the step `graph` was traced from, charted beside the prediction.
    `overlays`: your own numbers, ``{name: {node id or module name: value}}``, one colouring each
    (`payload.user_overlays`). `rank`, `units`: a rank's figures and FSDP units (`trace_rank_step`), whose
    collectives the memory chart marks.

    Raises:
        RenderError: the viewer's bundle is not built.
        ValueError: `measured` measured another graph, or `overlays` is malformed (the message says where).
    """
    return page_html(payload(graph, title=title, rankdir=rankdir, measured=measured, user=overlays, rank=rank,
                              units=units))


def notebook_html(graph: Graph, *, height: int = 640, with_bundle: bool = True, fit: bool = True,
                  fallback: str = "") -> str:
    """The viewer for a notebook cell: a sandboxed frame (scripts run, pictures download) holding the payload.

    The frame's page holds the styles, the gzipped payload and a small loader, not the 1.6 MB script: the
    script travels once per notebook, gzipped, in the output of the cell made with `with_bundle` (a
    ``<script type="application/octet-stream" id="graphviz-app-bundle">``), and a script beside each frame
    hands it to the frame when the frame asks (``postMessage``; a sandboxed frame reads nothing of the
    notebook's page). The front end remembers it once seen, so a cell run again still draws. Jupyter front
    ends differ in whether they run a cell's scripts; a frame's own page always does.

    `height`: the frame's first height in px. `fit`: once drawn, the frame takes the height its drawing needs
    (`notebook_cell`). `fallback`: HTML shown instead where the front end strips the frame (`notebook_cell`).

    Raises:
        RenderError: the viewer's bundle is not built.
    """
    return notebook_cell(payload(graph), height=height, with_bundle=with_bundle, fit=fit, fallback=fallback)


def notebook_cell(data: Mapping[str, Any], *, mount: str = "mount", title: str = "autograd graph", height: int = 640,
                  with_bundle: bool = True, fit: bool = True, fallback: str = "") -> str:
    """A notebook cell's viewer frame (as `notebook_html`) showing `data`, started by ``GraphvizAppViewer.<mount>``:
    "mount" for a viewer payload, "mountCompare" for a compare payload (`compare.compare_payload`).

    `height`: the frame's height in px until drawn. With `fit`, the drawn frame asks the page for the height its
    drawing needs (the taller pane's, for two): shown whole, at the width of its pane (at most 150%); else at the
    scale the viewer chose. The page keeps it between `FIT_MIN_HEIGHT` and the lower of `FIT_MAX_HEIGHT` and 85%
    of its window. It asks again whenever a redraw needs more (a big box opened), never for less. A person can drag
    the grip under the frame to any height (at least `FIT_MIN_HEIGHT`), which then stays. As the
    frame changes size, a drawing shown whole is fitted again, else what is in the middle of each pane stays.

    `fallback`: HTML (trusted markup, e.g. `drawing.notebook.static_html`) put after the frame and hidden by a
    style rule while the frame is there. A front end that sanitizes the output (JupyterLab and Notebook 7 for a
    notebook not trusted: no frame, no script, no style survive) shows it instead of an empty cell.

    Raises:
        ValueError: `mount` is not one of MOUNTS, or `height` is not a whole number of px from 1 up.
        RenderError: the viewer's bundle is not built.
    """
    if mount not in MOUNTS:
        raise ValueError(f"mount must be one of {', '.join(MOUNTS)}, got {mount!r}")
    if isinstance(height, bool) or not isinstance(height, int) or height < 1:
        raise ValueError(f"height must be a whole number of px from 1 up (like 640), got {height!r}")
    page = _NOTEBOOK_PAGE.format(csp=CONTENT_SECURITY_POLICY, css=bundle_css(), data=encode(data),
                                 missing=json.dumps(_NO_BUNDLE), mount=mount, title=html.escape(title),
                                 fit=json.dumps(fit))
    carried = ""
    if with_bundle:
        carried = f'<script type="application/octet-stream" id="graphviz-app-bundle">{bundle_gzip()}</script>'
    if fallback:
        fallback = f'<div class="graphviz-app-fallback">{fallback}</div>'
    least = min(FIT_MIN_HEIGHT, int(height))
    return (f'<div class="graphviz-app-cell">{carried}<style>{_CELL_STYLE}</style>'
            f'<iframe class="graphviz-app-viewer" title="{html.escape(title, quote=True)}" '
            f'sandbox="allow-scripts allow-downloads" data-fit-min="{least}" data-fit-max="{FIT_MAX_HEIGHT}" '
            f'style="display: block; width: 100%; height: {int(height)}px; border: 0" '
            f'srcdoc="{html.escape(page, quote=True)}"></iframe>'
            f'<div class="graphviz-app-grip" title="Drag (or the arrow keys) to change the height" role="separator" '
            f'aria-orientation="horizontal" tabindex="0" style="display: none"></div>'
            f"{fallback}<script>{_HAND_OVER}</script></div>")


# Where the frame is, the grip under it shows and the fallback does not; a sanitizer that strips the frame strips
# this style too (and the grip's own style hides it), so there the fallback shows alone.
_CELL_STYLE = (
    ".graphviz-app-cell > iframe.graphviz-app-viewer ~ .graphviz-app-fallback { display: none } "
    ".graphviz-app-cell > iframe.graphviz-app-viewer + .graphviz-app-grip { display: block !important; height: 10px; "
    "cursor: ns-resize; touch-action: none; background: linear-gradient(#9aa3b5, #9aa3b5) center / 48px 3px no-repeat }"
)

_NO_BUNDLE = (
    "The viewer's script is not on this page: it travels once, in the first graph cell's output of a kernel "
    "session, and the front end did not hand it over (that output was cleared, or the notebook is not trusted, "
    "so its scripts do not run). Trust the notebook, or restart the kernel and run all cells."
)

# In the notebook's page, beside each frame: answer a frame asking for the script with the gzipped bundle
# found on the page (remembered once found, so a later cell still gets it after the first is run again), and
# give a frame asking for a height that height, within the bounds its attributes and the window set. One
# listener per page: the frame is found by its window, the message's source.
_HAND_OVER = """(function () {
  var w = window;
  function bundle() {
    if (!w.__graphvizAppBundle) {
      var el = document.getElementById("graphviz-app-bundle");
      if (el) w.__graphvizAppBundle = el.textContent;
    }
    return w.__graphvizAppBundle || null;
  }
  function send(target) { target.postMessage({kind: "graphviz-app-bundle", js: bundle()}, "*"); }
  function size(source, height) {
    var frames = document.querySelectorAll("iframe.graphviz-app-viewer[data-fit-min]");
    for (var i = 0; i < frames.length; i++) {
      var f = frames[i];
      if (f.contentWindow !== source || f.hasAttribute("data-sized-by-hand")) continue;
      var least = +f.getAttribute("data-fit-min");
      var most = Math.max(least, Math.min(+f.getAttribute("data-fit-max"), Math.round(w.innerHeight * 0.85)));
      f.style.height = Math.round(Math.max(least, Math.min(most, height))) + "px";
    }
  }
  // Dragging the grip under a frame sets the frame's height (at least its data-fit-min); the frame lets the pointer
  // through meanwhile. Caught before the front end's own handlers (a notebook selects cells on a press).
  function drag(event) {
    var grip = event.target && event.target.closest ? event.target.closest(".graphviz-app-grip") : null;
    var frame = grip ? grip.previousElementSibling : null;
    if (!frame || event.button !== 0 || !frame.matches("iframe.graphviz-app-viewer")) return;
    event.preventDefault();
    event.stopPropagation();
    frame.setAttribute("data-sized-by-hand", "");  // the frame's later asks for height leave it as dragged
    var start = event.clientY, from = frame.getBoundingClientRect().height, least = +frame.getAttribute("data-fit-min");
    frame.style.pointerEvents = "none";
    grip.setPointerCapture(event.pointerId);
    function move(e) { frame.style.height = Math.round(Math.max(least || 0, from + e.clientY - start)) + "px"; }
    function end() {
      grip.removeEventListener("pointermove", move);
      grip.removeEventListener("pointerup", end);
      grip.removeEventListener("pointercancel", end);
      frame.style.pointerEvents = "";
    }
    grip.addEventListener("pointermove", move);
    grip.addEventListener("pointerup", end);
    grip.addEventListener("pointercancel", end);
  }
  // The focused grip's arrow keys: 40 px shorter (up) or taller (down).
  function key(event) {
    var grip = event.target && event.target.classList && event.target.classList.contains("graphviz-app-grip");
    var frame = grip ? event.target.previousElementSibling : null;
    var by = {ArrowUp: -40, ArrowDown: 40}[event.key];
    if (!frame || !by || !frame.matches("iframe.graphviz-app-viewer")) return;
    event.preventDefault();
    event.stopPropagation();  // not the notebook's own keys (moving between cells)
    frame.setAttribute("data-sized-by-hand", "");
    var least = +frame.getAttribute("data-fit-min") || 0;
    frame.style.height = Math.round(Math.max(least, frame.getBoundingClientRect().height + by)) + "px";
  }
  bundle();
  if (!w.__graphvizAppHandOver) {
    w.__graphvizAppHandOver = 2;
    document.addEventListener("pointerdown", drag, true);
    document.addEventListener("keydown", key, true);
    w.addEventListener("message", function (event) {
      var m = event.data;
      if (!m || !event.source) return;
      if (m.kind === "graphviz-app-ready") send(event.source);
      else if (m.kind === "graphviz-app-height" && typeof m.height === "number" && isFinite(m.height)) {
        size(event.source, m.height);
      }
    });
  }
})();"""

_NOTEBOOK_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{csp}">
<meta name="generator" content="graphviz-app">
<title>{title}</title>
<style>
html, body {{ margin: 0; height: 100%; }}
#gv-root {{ height: 100vh; box-sizing: border-box; padding: 6px; }}
.gv-wait {{ font: 13px sans-serif; color: #8a4b00; }}
{css}
</style>
</head>
<body>
<div id="gv-root"></div>
<script type="application/octet-stream" id="gv-payload">{data}</script>
<script>
(function () {{
  var root = document.getElementById("gv-root");
  var started = false;
  function note(text) {{
    var p = document.createElement("p");
    p.className = "gv-wait";
    p.setAttribute("data-testid", "viewer-no-bundle");
    p.textContent = text;
    root.replaceChildren(p);
  }}
  function run(js) {{
    var bytes = Uint8Array.from(atob(js), function (c) {{ return c.charCodeAt(0); }});
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Response(stream).text().then(function (text) {{
      var script = document.createElement("script");
      script.textContent = text;  // runs as the page's inline script, so the layout worker can start from it
      document.head.appendChild(script);
      root.replaceChildren();
      return GraphvizAppViewer.{mount}(root, document.getElementById("gv-payload").textContent, {{focus: false}});
    }});
  }}
  // Once drawn: when the frame changes size (a person drags its corner, the page fits it), a drawing shown whole
  // is fitted again, else what is in the middle of each pane stays there. With fit, ask the page for the height
  // the drawing needs: shown whole, as wide as the pane (at most 150%); else at the scale the viewer chose.
  function follow(views) {{
    var zooms = views.map(function (v) {{ return v.panzoom; }}).filter(Boolean);
    if (!zooms.length) return;
    var fitButton = views[0].ui && views[0].ui.buttons ? views[0].ui.buttons.fit : null;  // fits every pane
    function whole(z, s) {{ return Math.abs(z.k - Math.min(1.5, s.W / (z.w + 20), s.H / (z.h + 20))) < 1e-3; }}
    function wholeAll(sizes) {{ return zooms.every(function (z, i) {{ return whole(z, sizes[i]); }}); }}
    var last = zooms.map(function (z) {{ return z.size(); }});
    window.addEventListener("resize", function () {{
      var now = zooms.map(function (z) {{ return z.size(); }});
      var refit = fitButton && wholeAll(last);
      var to = zooms.map(function (z, i) {{
        return {{tx: z.tx + (now[i].W - last[i].W) / 2, ty: z.ty + (now[i].H - last[i].H) / 2}};
      }});
      last = now;
      if (refit) {{ fitButton.click(); return; }}
      // One pane at a time: synced panes pass a move on, so the second may be there already.
      zooms.forEach(function (z, i) {{ z.tx = to[i].tx; z.ty = to[i].ty; z.apply(); }});
    }});
    if (!{fit}) return;
    function needed() {{
      var sizes = zooms.map(function (z) {{ return z.size(); }}), shownWhole = wholeAll(sizes);
      return Math.round(window.innerHeight + Math.max.apply(null, zooms.map(function (z, i) {{
        var k = shownWhole ? Math.min(1.5, sizes[i].W / (z.w + 20)) : z.k;
        return (z.h + 20) * k + 4 - sizes[i].H;
      }})));
    }}
    var asked = -Infinity;
    function ask() {{  // only ever taller: the page bounds it, and a height a person chose stays
      var wanted = needed();
      if (!(wanted > asked)) return;
      asked = wanted;
      root.dataset.fitHeight = String(wanted);
      root.dataset.fitAsks = String(+(root.dataset.fitAsks || 0) + 1);
      window.parent.postMessage({{kind: "graphviz-app-height", height: wanted}}, "*");
    }}
    ask();
    // Each redraw (a box opened, a layout back from the worker) may need more height: ask again when it does.
    var redrawn = new MutationObserver(ask);
    views.forEach(function (v) {{
      if (v.root) redrawn.observe(v.root, {{attributes: true, attributeFilter: ["data-last-refresh-ms"]}});
    }});
  }}
  window.addEventListener("message", function (event) {{
    var message = event.data;
    if (event.source !== window.parent || !message || message.kind !== "graphviz-app-bundle" || started) return;
    if (typeof message.js !== "string") {{ note({missing}); return; }}
    started = true;
    run(message.js).then(function (shown) {{ follow(!shown ? [] : shown.panes ? shown.panes : [shown]); }},
                         function (e) {{ note("Could not start the viewer: " + e); }});
  }});
  // Ask until answered: a front end may run the script beside this frame after the frame has loaded.
  var asked = 0;
  var asking = setInterval(function () {{
    asked += 1;
    if (started || asked > 40) {{
      clearInterval(asking);
      if (!started) note({missing});
      return;
    }}
    window.parent.postMessage({{kind: "graphviz-app-ready"}}, "*");
  }}, 250);
  window.parent.postMessage({{kind: "graphviz-app-ready"}}, "*");
}})();
</script>
</body>
</html>
"""
