"""Orders of derivatives in a graph: which nodes the forward made, which its backward, which the backward of that."""

from __future__ import annotations

from collections import Counter

from ..model import EdgeKind, Graph, NodeKind

__all__ = ["node_orders", "order_counts", "has_orders", "unrecorded_orders_note"]


def has_orders(graph: Graph) -> bool:
    """Whether the graph carries orders (traced after a backward recorded by `record_orders()`)."""
    return any(n.order is not None for n in graph.nodes)


def node_orders(graph: Graph) -> dict[str, int]:
    """Node id -> order of each op (0: made by the forward) and of each saved tensor (its op's order).

    Empty for a graph without orders.

    >>> from graphviz_app.model import Node
    >>> g = Graph((Node("n0", NodeKind.OP, "MulBackward0", order=1), Node("n1", NodeKind.OP, "TanhBackward0")), ())
    >>> node_orders(g)
    {'n0': 1, 'n1': 0}
    """
    if not has_orders(graph):
        return {}
    found = {n.id: n.order or 0 for n in graph.nodes if n.kind is NodeKind.OP}
    for e in graph.edges:
        if e.kind is EdgeKind.SAVED and e.dst in found:
            found.setdefault(e.src, found[e.dst])
    return found


def order_counts(graph: Graph) -> dict[int, int]:
    """Order -> number of ops of that order, lowest order first."""
    counts = Counter(n.order or 0 for n in graph.nodes if n.kind is NodeKind.OP)
    return dict(sorted(counts.items())) if has_orders(graph) else {}


def unrecorded_orders_note(graph: Graph) -> str | None:
    """A sentence for a graph that holds nodes of a higher-order backward but no orders, else None."""
    if has_orders(graph):
        return None
    twice = sorted({n.name for n in graph.nodes if n.kind is NodeKind.OP and "BackwardBackward" in n.name})
    if not twice:
        return None
    return (
        f"this graph holds nodes made by a backward with create_graph=True ({', '.join(twice[:3])}"
        f"{', ...' if len(twice) > 3 else ''}), but no orders: compute the gradients inside "
        "`with graphviz_app.record_orders():` to number them"
    )
