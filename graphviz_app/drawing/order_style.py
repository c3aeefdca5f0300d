"""Colour a graph by order of derivative: the forward's nodes, its backward's, the backward of that."""

from __future__ import annotations

from typing import Any

from graphviz.quoting import attr_list

from ..analysis.orders import has_orders, node_orders, order_counts
from ..errors import RenderError
from ..model import Edge, Graph, Node, NodeKind
from .dot_text import escape_text
from .gradient_style import default_coloring

__all__ = ["OrderOverlay", "ORDER_FILLS", "order_fill", "order_viewer_overlay", "picture_coloring"]

# Order 1, 2, 3, ... (order 0, the forward, keeps its device colour).
ORDER_FILLS = ("#fff3bf", "#ffc9c9", "#e5dbff", "#c3fae8")
ORDER_BORDERS = ("#f08c00", "#e03131", "#7048e8", "#0ca678")


def picture_coloring(graph: Graph) -> str:
    """The `color_by` of a picture made for a person who chose no colouring (the page's downloads).

    "order" for a gradient of a gradient (which orders the graph's nodes belong to is what it shows),
    else `default_coloring`: "gradient" when traced with gradients, else "device".

    >>> picture_coloring(Graph((Node("n0", NodeKind.OP, "MulBackward0", order=1),), ()))
    'order'
    >>> picture_coloring(Graph((Node("n0", NodeKind.OP, "MulBackward0"),), ()))
    'device'
    """
    return "order" if has_orders(graph) else default_coloring(graph)


def order_fill(order: int) -> tuple[str, str]:
    """(fill, border) colours of an order >= 1.

    >>> order_fill(1) != order_fill(2)
    True
    """
    i = (order - 1) % len(ORDER_FILLS)
    return ORDER_FILLS[i], ORDER_BORDERS[i]


class OrderOverlay:
    """Per-node attributes of `render(color_by="order")`: each order its own fill, an `order k` line."""

    def __init__(self, graph: Graph) -> None:
        self.orders = node_orders(graph)
        if not self.orders:
            raise RenderError(
                "color_by='order' needs a graph with orders: compute its gradients inside "
                "`with graphviz_app.record_orders():` (with create_graph=True), then trace"
            )
        self.counts = order_counts(graph)
        self.names = {n.id: n.name for n in graph.nodes}

    def node(self, node: Node, label: str) -> tuple[str, str]:
        order = self.orders.get(node.id)
        if not order:
            return label, ""
        fill, border = order_fill(order)
        line = f"order {order}"
        if node.differentiates is not None:
            line += f" of {self.names.get(node.differentiates, node.differentiates)} ({node.differentiates})"
        elif (outside := dict(node.attrs).get("differentiates")) is not None:  # a node this graph does not reach
            line += f" of {outside.split(' (', 1)[0]} (not drawn)"
        text = label + "\\n" + escape_text(line) if node.kind is NodeKind.OP else label
        return text, attr_list(kwargs={"fillcolor": fill, "color": border})[2:-1] + " "

    def edge_attrs(self, edge: Edge) -> str | None:
        return None

    def legend_rows(self) -> list[str]:
        rows = ['<TR><TD COLSPAN="2"><B>order of derivative</B></TD></TR>']
        for order, count in self.counts.items():
            if order == 0:
                rows.append(f"<TR><TD>device fill</TD><TD>order 0: the forward's ops ({count})</TD></TR>")
            else:
                what = "the forward's backward" if order == 1 else f"the backward of order {order - 1}"
                rows.append(f'<TR><TD BGCOLOR="{order_fill(order)[0]}"> </TD>'
                            f"<TD>order {order}: made by {what} ({count})</TD></TR>")
        return rows

    def graph_attrs(self) -> dict[str, str]:
        return {}


def order_viewer_overlay(graph: Graph) -> dict[str, Any]:
    """The interactive viewer's "order" colouring of a graph with orders (see `graphviz_app.viewer`).

    Each op and saved tensor holds its order (0 the forward's), each box the highest order inside it.
    """
    from ..viewer.tree import build_tree

    orders = node_orders(graph)
    values: list[float | None] = [orders.get(n.id) for n in graph.nodes]
    tree = build_tree(graph)
    group: list[float | None] = [None] * len(tree.parent)
    for i, value in enumerate(values):
        g = tree.node_group[i]
        while value is not None and g >= 0 and (group[g] is None or group[g] < value):  # type: ignore[operator]
            group[g] = value
            g = tree.parent[g]
    return {"key": "order", "label": "order of derivative (0: the forward's ops)", "scale": "linear", "unit": "",
            "node": values, "group": group, "flag": []}
