"""The interactive graph viewer: one browser bundle for the HTML file, the notebook and the web page.

The Python side turns a `Graph` into the viewer's payload (`payload.payload`) and wraps it with the
bundle built from this folder's npm project (`npm ci && npm run build`: `dist/viewer.js`, `dist/viewer.css`)
into a page (`html.viewer_html`), a notebook cell (`html.notebook_html`) or the web page's component.

The payload contract (JSON, sent gzipped in base64; `PAYLOAD_VERSION` 1, or 2, `packing.PACKED_VERSION`,
once a long column is packed by `payload.encode`)::

    {"format": "graphviz-app-viewer", "version": 1, "title": str,
     "options": {"rankdir": "TB", "opening": "auto" | "given"},
     "graph": <the graph in compact schema 3, graphviz_app.model.compact>,
     "tree": {"parent", "kind", "label", "module", "instance", "count": one entry per box (box 0: the graph),
              "node_group", "node_instance": one entry per node},
     "open": [box, ...],                       # the opening view when "opening" is "given" (else the
                                               # viewer opens the deepest module level that fits its pane)
     "overlays": [overlay, ...],               # colourings offered beside "kind"
     "series": [series, ...],                  # optional, per-step data (the first drawable one is charted)
     "notes": [str, ...]}                      # optional, shown in the status line (why a block is missing)

In the page's text (`payload.encode`) a column of at least `packing.PACK_FROM` entries (the graph's, the
boxes' and each overlay's "node" and "group") travels packed: one value, a range, or little-endian numbers
in base64 (`packing`; the bundle's `src/unpack.js` reads it back as typed arrays, `packing.unpack` as lists).

An overlay colours nodes and boxes by a number: ``{"key": str, "label": str, "scale": "log" | "linear",
"unit": "bytes" | "", "node": [float | null per node], "group": [float | null per box],
"flag": [node index, ...]}`` (flagged nodes are drawn red, e.g. NaN gradients), optionally
``"mark": [node index, ...], "mark_label": str, "mark_badge": str`` (marked nodes, or the closed box
standing for one, get a ring and a badge; the legend names them). The viewer offers every overlay
in its colour menu and shows its values in the details panel; "gradient" and "memory" (bytes saved
for backward) are built in (`payload.overlays`), and "held" (bytes held at the memory peak, the peak
node marked) comes with the memory replay (`viewer.memory`). More colourings (a diff's status as
0/1/2 with "scale": "linear") are added with `payload(..., extra_overlays=[...])`.

A series is a sequence of values over steps, charted under the graph: ``{"key": str,
"label": str, "unit": str, "x_label": str, "values": [float, ...], "node_step": [int | -1 per node],
"peak": int, "notes": [str, ...]}`` (`node_step`: the step at which a node runs; `peak`: the step
marked and labelled, default the largest value). Hovering a step names its node, clicking it
selects the node. "live_bytes" (live bytes over backward, `memory_timeline`) is built in when the
graph has saved tensors and a backward order; "measured_bytes" (``"of": "live_bytes"``: drawn as a
second line on that chart, its `values` per the same steps, None where not measured, with the measured
`peak_bytes`) comes with a measurement (`payload(..., measured=...)`). The viewer ignores unknown keys
and blocks it cannot draw; adding a block never breaks an older viewer.

A compare file (`compare.compare_html`, `save((graph_a, graph_b), "x.html")`) carries two such payloads
and `diff()`'s alignment (``{"format": "graphviz-app-compare", "panes": [a, b], "match", "status",
"changes", ...}``, see `compare.compare_payload`); the bundle's `mountCompare` shows them side by side.
"""

from __future__ import annotations

from .html import notebook_html, page_html, viewer_html
from .payload import PAYLOAD_FORMAT, PAYLOAD_VERSION, payload

__all__ = ["payload", "viewer_html", "page_html", "notebook_html", "PAYLOAD_FORMAT", "PAYLOAD_VERSION"]
