"""A graph as the page shows it: the interactive viewer's data and the module table's rows."""

from __future__ import annotations

from ..analysis.module_tree import module_depth, node_modules
from ..analysis.orders import has_orders
from ..drawing.order_style import order_viewer_overlay
from ..model import Graph, human_bytes
from ..viewer.payload import encode, payload
from ..web.urlstate import Options

__all__ = ["viewer_data", "module_rows", "depth_note"]


def viewer_data(graph: Graph, options: Options, *, title: str) -> str:
    """`graph` as the viewer's data (base64 of gzipped JSON), opened as the sidebar asks.

    The sidebar's module depth picks the opening view (0: the deepest readable level)
    and its roll option whether repeated modules share one box; a graph with orders of
    derivative gets the "order" colouring.

    >>> from graphviz_app.model import Node, NodeKind
    >>> viewer_data(Graph((Node("n0", NodeKind.OUTPUT, "output"),), ()), Options(), title="program")[:4]
    'H4sI'
    """
    extra = []
    if has_orders(graph):  # a gradient of a gradient: the colour menu offers each order of derivative
        extra.append(order_viewer_overlay(graph))
    data = payload(graph, title=title, rankdir=options.rankdir, roll=options.roll,
                   depth=options.module_depth or None, extra_overlays=extra)
    return encode(data)


def module_rows(graph: Graph) -> tuple[tuple[str, str, str, str, str, str], ...]:
    """`Graph.module_summary()` as text cells, for the page's module table."""
    summary = graph.module_summary()
    return tuple((r.module or "(program)", r.type or "?", f"{r.ops:,}",
                  human_bytes(r.activation_bytes) if summary.saved_traced else "not traced",
                  f"{r.params:,}", human_bytes(r.param_bytes)) for r in summary)


def depth_note(graph: Graph, depth: int) -> list[str]:
    """The page's note when its Module depth closes no module box, naming the depth that would.

    The sidebar's depth d opens the modules above depth d and closes the rest (0: the viewer
    picks), so a depth past the deepest module with ops shows every op with no box.

    >>> from graphviz_app.model import Node, NodeKind
    >>> g = Graph((Node("n0", NodeKind.OP, "MmBackward0", module="gru"),), ())
    >>> print(depth_note(g, 2)[0])  # doctest: +ELLIPSIS
    Module depth 2 closes no module: the deepest module with ops is at depth 1 ('gru'), ...; Module depth 1 ...
    >>> depth_note(g, 1), depth_note(g, 0)
    ([], [])
    """
    owners = {m for m in node_modules(graph).values() if m}
    if depth <= 0 or not owners:
        return []
    deepest = max(owners, key=lambda m: (module_depth(m), m))
    level = module_depth(deepest)
    if level >= depth:
        return []
    return [f"Module depth {depth} closes no module: the deepest module with ops is at depth {level} ({deepest!r}), "
            f"so every module is drawn open; Module depth {level} shows the modules at depth {level} as closed "
            "boxes (click one to open it)"]
