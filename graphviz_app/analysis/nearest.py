"""The part of a graph nearest its outputs: the first N nodes by distance, walking back from the outputs."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from ..errors import GraphvizAppError
from ..model import Graph, NodeKind

__all__ = ["Nearest", "nearest"]


@dataclass(frozen=True, slots=True)
class Nearest:
    """`graph` holds the `limit` nodes nearest the outputs; `hidden` how many were left out.

    `frontier` names the kept nodes that have an input left out (where the
    drawing stops), in the graph's node order.
    """

    graph: Graph
    hidden: int
    frontier: tuple[str, ...]


def nearest(graph: Graph, *, limit: int) -> Nearest:
    """Keep the `limit` nodes nearest the outputs, by the number of edges walked back.

    Outputs are the OUTPUT nodes, or the nodes nothing consumes when there
    are none. Ties keep the graph's walk order, so the result is
    deterministic. Edges between kept nodes are kept; notes, modules and
    the truncated flag carry over.

    Raises:
        GraphvizAppError: `limit` is below 1.

    >>> from graphviz_app.model import Edge, Node
    >>> g = Graph(nodes=tuple(Node(f"n{i}", NodeKind.OP, f"Op{i}") for i in range(4)),
    ...           edges=(Edge("n3", "n2"), Edge("n2", "n1"), Edge("n1", "n0")))
    >>> part = nearest(g, limit=2)
    >>> [n.id for n in part.graph.nodes], part.hidden, part.frontier
    (['n0', 'n1'], 2, ('n1',))
    """
    if limit < 1:
        raise GraphvizAppError(f"limit must be at least 1 node, got {limit}; pass the number of nodes to keep")
    if len(graph.nodes) <= limit:
        return Nearest(graph=graph, hidden=0, frontier=())
    inputs: dict[str, list[str]] = {n.id: [] for n in graph.nodes}
    consumed: set[str] = set()
    for e in graph.edges:
        inputs[e.dst].append(e.src)
        consumed.add(e.src)
    starts = [n.id for n in graph.nodes if n.kind is NodeKind.OUTPUT]
    if not starts:
        starts = [n.id for n in graph.nodes if n.id not in consumed] or [graph.nodes[0].id]
    kept: set[str] = set(starts[:limit])
    queue = deque(starts[:limit])
    while queue and len(kept) < limit:
        for src in inputs[queue.popleft()]:
            if src not in kept:
                kept.add(src)
                queue.append(src)
                if len(kept) == limit:
                    break
    nodes = tuple(n for n in graph.nodes if n.id in kept)
    edges = tuple(e for e in graph.edges if e.src in kept and e.dst in kept)
    frontier = tuple(n.id for n in nodes if any(src not in kept for src in inputs[n.id]))
    part = Graph(nodes=nodes, edges=edges, notes=graph.notes, truncated=graph.truncated,
                 modules=graph.modules, nonfinite_origin=graph.nonfinite_origin)
    return Nearest(graph=part, hidden=len(graph.nodes) - len(nodes), frontier=frontier)
