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

__all__ = ["CONTENT_SECURITY_POLICY", "MOUNTS", "viewer_html", "page_html", "standalone_page", "notebook_html",
           "notebook_cell"]

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


def notebook_html(graph: Graph, *, height: int = 640, with_bundle: bool = True) -> str:
    """The viewer for a notebook cell: a sandboxed frame (scripts run, pictures download) holding the payload.

    The frame's page holds the styles, the gzipped payload and a small loader, not the 1.6 MB script: the
    script travels once per notebook, gzipped, in the output of the cell made with `with_bundle` (a
    ``<script type="application/octet-stream" id="graphviz-app-bundle">``), and a script beside each frame
    hands it to the frame when the frame asks (``postMessage``; a sandboxed frame reads nothing of the
    notebook's page). The front end remembers it once seen, so a cell run again still draws. Jupyter front
    ends differ in whether they run a cell's scripts; a frame's own page always does.

    Raises:
        RenderError: the viewer's bundle is not built.
    """
    return notebook_cell(payload(graph), height=height, with_bundle=with_bundle)


def notebook_cell(data: Mapping[str, Any], *, mount: str = "mount", title: str = "autograd graph", height: int = 640,
                  with_bundle: bool = True) -> str:
    """A notebook cell's viewer frame (as `notebook_html`) showing `data`, started by ``GraphvizAppViewer.<mount>``:
    "mount" for a viewer payload, "mountCompare" for a compare payload (`compare.compare_payload`).

    Raises:
        ValueError: `mount` is not one of MOUNTS.
        RenderError: the viewer's bundle is not built.
    """
    if mount not in MOUNTS:
        raise ValueError(f"mount must be one of {', '.join(MOUNTS)}, got {mount!r}")
    page = _NOTEBOOK_PAGE.format(csp=CONTENT_SECURITY_POLICY, css=bundle_css(), data=encode(data),
                                 missing=json.dumps(_NO_BUNDLE), mount=mount, title=html.escape(title))
    carried = ""
    if with_bundle:
        carried = f'<script type="application/octet-stream" id="graphviz-app-bundle">{bundle_gzip()}</script>'
    return (f'<div class="graphviz-app-cell">{carried}'
            f'<iframe class="graphviz-app-viewer" title="{html.escape(title, quote=True)}" '
            f'sandbox="allow-scripts allow-downloads" '
            f'style="width: 100%; height: {int(height)}px; border: 0" srcdoc="{html.escape(page, quote=True)}">'
            f"</iframe><script>{_HAND_OVER}</script></div>")


_NO_BUNDLE = (
    "The viewer's script is not on this page: it travels once, in the first graph cell's output of a kernel "
    "session, and the front end did not hand it over (that output was cleared, or the notebook is not trusted, "
    "so its scripts do not run). Trust the notebook, or restart the kernel and run all cells."
)

# In the notebook's page, beside each frame: answer a frame asking for the script with the gzipped bundle
# found on the page (remembered once found, so a later cell still gets it after the first is run again).
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
  bundle();
  if (!w.__graphvizAppListening) {
    w.__graphvizAppListening = true;
    w.addEventListener("message", function (event) {
      if (event.data && event.data.kind === "graphviz-app-ready" && event.source) send(event.source);
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
      GraphvizAppViewer.{mount}(root, document.getElementById("gv-payload").textContent, {{focus: false}});
    }});
  }}
  window.addEventListener("message", function (event) {{
    var message = event.data;
    if (event.source !== window.parent || !message || message.kind !== "graphviz-app-bundle" || started) return;
    if (typeof message.js !== "string") {{ note({missing}); return; }}
    started = true;
    run(message.js).catch(function (e) {{ note("Could not start the viewer: " + e); }});
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
