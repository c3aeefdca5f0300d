"""The viewer as one self-contained HTML file: script, styles and the gzipped graph inline, no request made."""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

from ..analysis.memory import MeasuredMemory
from ..model import Graph
from .bundle import bundle_css, bundle_js
from .payload import UserOverlays, encode, payload

__all__ = ["CONTENT_SECURITY_POLICY", "viewer_html", "page_html", "notebook_html"]

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
GraphvizAppViewer.mount(document.getElementById("gv-root"), document.getElementById("gv-payload").textContent,
  {{fragment: location.hash, focus: window.top === window, onView: function (hash) {{
    try {{ history.replaceState(null, "", hash); }} catch (e) {{ /* a sandboxed frame keeps no history */ }}
  }}}});
</script>
</body>
</html>
"""


def page_html(data: Mapping[str, Any]) -> str:
    """An HTML page showing the viewer payload `data` (see `payload.payload`).

    The title is escaped; the payload is base64 text, which holds no character HTML reads as markup.
    """
    title = str(data.get("title", "autograd graph"))
    return _PAGE.format(csp=CONTENT_SECURITY_POLICY, title=html.escape(title), css=bundle_css(),
                        data=encode(data), js=bundle_js())


def viewer_html(graph: Graph, *, title: str = "autograd graph", rankdir: str = "TB",
                measured: MeasuredMemory | None = None, overlays: UserOverlays | None = None) -> str:
    """`graph` in the interactive viewer, as the text of one self-contained HTML file.

    `measured`: a measurement of the step `graph` was traced from, charted beside the prediction.
    `overlays`: your own numbers, ``{name: {node id or module name: value}}``, one colouring each
    (`payload.user_overlays`).

    Raises:
        RenderError: the viewer's bundle is not built.
        ValueError: `measured` measured another graph, or `overlays` is malformed (the message says where).
    """
    return page_html(payload(graph, title=title, rankdir=rankdir, measured=measured, user=overlays))


def notebook_html(graph: Graph, *, height: int = 640) -> str:
    """The viewer for a notebook cell: the whole page in a sandboxed frame (scripts run, pictures download).

    Jupyter front ends differ in whether they run a cell's scripts; a frame's own page always does.
    """
    page = viewer_html(graph)
    return (f'<iframe class="graphviz-app-viewer" title="autograd graph" sandbox="allow-scripts allow-downloads" '
            f'style="width: 100%; height: {int(height)}px; border: 0" srcdoc="{html.escape(page, quote=True)}">'
            "</iframe>")
