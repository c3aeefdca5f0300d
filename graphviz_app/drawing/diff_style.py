"""Draw a diff as one graph coloured by change: added green, removed red and dashed, changed orange."""

from __future__ import annotations

import json
from pathlib import Path

import graphviz
from graphviz.quoting import attr_list

from ..analysis.diff import GraphDiff
from ..analysis.diff_view import DiffView, diff_view
from ..errors import RenderError, UnsupportedFormatError
from ..model import Edge, Graph, Node
from .cost import measure
from .dot_text import escape_text, graphviz_attr
from .fallback import DEFAULT_TIMEOUT
from .layout import lay_out
from .renderer import RANKDIRS, _draw
from .style import KIND_STYLE

__all__ = ["DiffOverlay", "STATUS_LOOK", "STATUS_CODE", "render_diff", "export_diff", "save_diff", "DIFF_FORMATS"]

# Status -> (fill, border, words for the legend).
STATUS_LOOK = {
    "added": ("#d3f9d8", "#2f9e44", "only in the second graph (added)"),
    "removed": ("#ffe3e3", "#e03131", "only in the first graph (removed, dashed)"),
    "changed": ("#ffe8cc", "#e8590c", "in both, changed (what changed is written in)"),
}
DIFF_FORMATS = ("svg", "png", "pdf", "dot", "json", "html")
# A node's status as the viewer's "diff" colouring holds it (its scale is linear).
STATUS_CODE = {"same": 0, "added": 1, "removed": 2, "changed": 3}


class DiffOverlay:
    """Per-node and per-edge attributes of a diff drawing (the renderer's overlay)."""

    def __init__(self, view: DiffView) -> None:
        self.view = view

    def node(self, node: Node, label: str) -> tuple[str, str]:
        status = self.view.node_status(node.id)
        if status == "same":
            return label, ""
        fill, border, _ = STATUS_LOOK[status]
        style = {"fillcolor": fill, "color": border, "penwidth": "2"}
        if status == "removed":
            style["style"] = KIND_STYLE[node.kind]["style"] + ",dashed"
        lines = [label] + [escape_text(f"{what}: {before} -> {after}")
                           for what, before, after in self.view.changes.get(node.id, ())]
        return "\\n".join(lines), attr_list(kwargs=style)[2:-1] + " "

    def edge_attrs(self, edge: Edge) -> str | None:
        status = self.view.edges.get((edge.src, edge.dst, edge.kind.value, edge.output_nr, edge.slot))
        if status is None:
            return None
        style = {"color": STATUS_LOOK[status][1], "penwidth": "2"}
        if status == "removed":
            style["style"] = "dashed"
        return attr_list(kwargs=style)

    def legend_rows(self) -> list[str]:
        rows = ['<TR><TD COLSPAN="2"><B>diff</B></TD></TR>']
        rows += [f'<TR><TD BGCOLOR="{fill}"> </TD><TD>{words}</TD></TR>' for fill, _, words in STATUS_LOOK.values()]
        return rows

    def graph_attrs(self) -> dict[str, str]:
        first = str(self.view.diff).splitlines()[0]
        return {"label": graphviz_attr(first), "labelloc": "t", "labeljust": "l"}


def render_diff(graph_a: Graph, graph_b: Graph, found: GraphDiff | None = None, *, rankdir: str = "TB",
                legend: bool = True, max_attr_chars: int = 50, clusters: bool = True) -> graphviz.Digraph:
    """The Graphviz description of the diff from `graph_a` to `graph_b` as one graph coloured by change.

    Raises:
        RenderError: `rankdir` is not one Graphviz knows.
    """
    if rankdir not in RANKDIRS:
        raise RenderError(f"rankdir must be one of {', '.join(RANKDIRS)}, got {rankdir!r}")
    view = diff_view(graph_a, graph_b, found)
    return _draw(view.graph, rankdir=rankdir, legend=legend, max_attr_chars=max_attr_chars, clusters=clusters,
                 color_by="device", overlay=DiffOverlay(view))


def export_diff(graph_a: Graph, graph_b: Graph, fmt: str, found: GraphDiff | None = None, *, rankdir: str = "TB",
                engine: str = "auto", timeout: float | None = DEFAULT_TIMEOUT) -> bytes:
    """The diff drawing as bytes: svg, png, pdf, dot, json (the view graph with a `"diff"` block of each
    node's change) or html (the interactive viewer, with a "diff" colouring and the same block).

    A picture's layout is chosen by its measured cost, as `renderer.export` chooses, and stopped
    at `timeout` seconds (None: no limit).

    Raises:
        UnsupportedFormatError: `fmt` is none of those.
        LayoutTimeout: the layout ran past `timeout` (a RenderError saying what to do instead).
        DotNotFoundError, RenderError: as for `renderer.export`.
    """
    fmt = fmt.lower().lstrip(".")
    if fmt not in DIFF_FORMATS:
        raise UnsupportedFormatError(f"cannot write a diff as {fmt!r}: choose one of "
                                     f"{', '.join('.' + f for f in DIFF_FORMATS)}")
    view = diff_view(graph_a, graph_b, found)
    if fmt == "html":
        return _diff_html(view, rankdir=rankdir)
    if fmt == "json":
        return json.dumps({**view.graph.to_dict(), "diff": view.overlay()}, indent=1).encode()
    source = _draw(view.graph, rankdir=rankdir, legend=True, max_attr_chars=50, clusters=True, color_by="device",
                   overlay=DiffOverlay(view)).source
    if fmt == "dot":
        return source.encode()
    return lay_out(source, fmt, engine=engine, node_count=len(view.graph.nodes), timeout=timeout,
                   cost=measure(view.graph, clusters=True, legend=True))


def save_diff(graph_a: Graph, graph_b: Graph, path: str | Path, found: GraphDiff | None = None, *,
              rankdir: str = "TB", engine: str = "auto", timeout: float | None = DEFAULT_TIMEOUT) -> Path:
    """Write the diff drawing to `path`, the format chosen by its suffix; returns the path.

    Raises:
        UnsupportedFormatError: the suffix names no format `export_diff` writes.
        RenderError: the file cannot be written, or as for `export_diff`.
    """
    path = Path(path)
    data = export_diff(graph_a, graph_b, path.suffix, found, rankdir=rankdir, engine=engine, timeout=timeout)
    try:
        path.write_bytes(data)
    except OSError as e:
        raise RenderError(f"cannot write {str(path)!r}: {e.strerror}") from e
    return path


def _diff_html(view: DiffView, *, rankdir: str) -> bytes:
    """The view in the interactive viewer, coloured by change (a box takes the largest code inside it)."""
    from ..viewer import page_html, payload
    from ..viewer.tree import build_tree

    codes = [STATUS_CODE[view.node_status(n.id)] for n in view.graph.nodes]
    tree = build_tree(view.graph)
    group = [0] * len(tree.parent)
    for i, code in enumerate(codes):
        g = tree.node_group[i]
        while code and g >= 0 and group[g] < code:
            group[g] = code
            g = tree.parent[g]
    overlay = {"key": "diff", "label": "change: 1 added, 2 removed, 3 changed", "scale": "linear", "unit": "",
               "node": codes, "group": group, "flag": [i for i, c in enumerate(codes) if c == STATUS_CODE["removed"]]}
    data = payload(view.graph, title=str(view.diff).splitlines()[0], rankdir=rankdir, extra_overlays=[overlay])
    data["diff"] = view.overlay()  # the viewer keeps blocks it does not draw
    return page_html(data).encode()
