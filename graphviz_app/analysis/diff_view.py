"""One graph that shows a diff: graph b with what only graph a had put back, and each node's change."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..model import Edge, Graph
from .diff import GraphDiff, diff

__all__ = ["DiffView", "diff_view", "PairView", "pair_view", "STATUSES", "REMOVED_PREFIX"]

STATUSES = ("same", "added", "removed", "changed")
REMOVED_PREFIX = "a/"  # ids of the nodes only graph a has, in the view


@dataclass(frozen=True, slots=True)
class DiffView:
    """`graph`: every node and edge of both graphs once; `nodes`/`edges`: the status of those that are not "same".

    `changes` maps a changed node's id to its (what, before, after) rows. Edge
    statuses are keyed by (src, dst, kind, output_nr, slot) in the view's ids.
    """

    graph: Graph
    diff: GraphDiff
    nodes: dict[str, str]
    edges: dict[tuple[str, str, str, int, int], str]
    changes: dict[str, list[tuple[str, str, str]]]

    def node_status(self, node_id: str) -> str:
        return self.nodes.get(node_id, "same")

    def overlay(self) -> dict[str, Any]:
        """The view's change status as a JSON-ready block, for a viewer to lay over `graph`."""
        return {
            "nodes": dict(self.nodes),
            "changes": {k: [list(r) for r in rows] for k, rows in self.changes.items()},
            "edges": [[*key, status] for key, status in self.edges.items()],
            "counts": self.diff.counts(),
            "structural": self.diff.structural,
            "modules": [[m.module, m.ops_before, m.ops_after, m.bytes_before, m.bytes_after]
                        for m in self.diff.modules],
        }


def _edge_key(e: Edge) -> tuple[str, str, str, int, int]:
    return (e.src, e.dst, e.kind.value, e.output_nr, e.slot)


def diff_view(graph_a: Graph, graph_b: Graph, found: GraphDiff | None = None) -> DiffView:
    """The view of `diff(graph_a, graph_b)`: graph b's nodes, then those only in a (ids `a/n3`).

    >>> from graphviz_app.model import Node, NodeKind
    >>> a = Graph((Node("n0", NodeKind.OUTPUT, "output"), Node("n1", NodeKind.OP, "MulBackward0")), (Edge("n1", "n0"),))
    >>> b = Graph((Node("n0", NodeKind.OUTPUT, "output"), Node("n1", NodeKind.OP, "AddBackward0")), (Edge("n1", "n0"),))
    >>> view = diff_view(a, b)
    >>> [(n.id, view.node_status(n.id)) for n in view.graph.nodes]
    [('n0', 'same'), ('n1', 'added'), ('a/n1', 'removed')]
    """
    found = diff(graph_a, graph_b) if found is None else found
    to_b = dict(found.matched)
    only_a = {n.id for n in found.only_a}
    statuses: dict[str, str] = {n.id: "added" for n in found.only_b}
    changes: dict[str, list[tuple[str, str, str]]] = {}
    for c in found.changes:
        statuses.setdefault(c.b, "changed")
        changes.setdefault(c.b, []).append(c.row())

    def place(node_id: str) -> str:
        return to_b.get(node_id) or REMOVED_PREFIX + node_id

    removed = [replace(n, id=REMOVED_PREFIX + n.id) for n in graph_a.nodes if n.id in only_a]
    statuses.update({n.id: "removed" for n in removed})
    edges = list(graph_b.edges)
    edge_status: dict[tuple[str, str, str, int, int], str] = {}
    added_b = {(e.src, e.dst, e.kind) for e in found.edges_only_b}
    for e in graph_b.edges:
        if (e.src, e.dst, e.kind) in added_b:
            edge_status[_edge_key(e)] = "added"
    removed_a = {(e.src, e.dst, e.kind) for e in found.edges_only_a}
    for e in graph_a.edges:
        if (e.src, e.dst, e.kind) in removed_a:
            moved = replace(e, src=place(e.src), dst=place(e.dst))
            edges.append(moved)
            edge_status[_edge_key(moved)] = "removed"
    graph = replace(graph_b, nodes=graph_b.nodes + tuple(removed), edges=tuple(edges),
                    modules=tuple({m.name: m for m in graph_a.modules + graph_b.modules}.values()),
                    regions=(), notes=(), nonfinite_origin=None)
    return DiffView(graph, found, statuses, edge_status, changes)


@dataclass(frozen=True, slots=True)
class PairView:
    """A diff seen from both graphs, by node index: for two panes side by side.

    `match_a[i]`: the index in graph b of graph a's node i (-1: only in a, removed); `match_b` the other
    way (-1: only in b, added). `status_a`/`status_b`: each node's status (one of STATUSES). `changes_a`/
    `changes_b`: a changed node's (what, before, after) rows, by its index in its own graph.
    """

    diff: GraphDiff
    match_a: tuple[int, ...]
    match_b: tuple[int, ...]
    status_a: tuple[str, ...]
    status_b: tuple[str, ...]
    changes_a: dict[int, list[tuple[str, str, str]]]
    changes_b: dict[int, list[tuple[str, str, str]]]


def pair_view(graph_a: Graph, graph_b: Graph, found: GraphDiff | None = None) -> PairView:
    """`diff(graph_a, graph_b)`'s alignment by node index on both sides, with each node's status.

    >>> from graphviz_app.model import Node, NodeKind
    >>> a = Graph((Node("n0", NodeKind.OUTPUT, "output"), Node("n1", NodeKind.OP, "MulBackward0")), (Edge("n1", "n0"),))
    >>> b = Graph((Node("n0", NodeKind.OUTPUT, "output"), Node("n1", NodeKind.OP, "AddBackward0")), (Edge("n1", "n0"),))
    >>> view = pair_view(a, b)
    >>> view.match_a, view.status_a, view.status_b
    ((0, -1), ('same', 'removed'), ('same', 'added'))
    """
    found = diff(graph_a, graph_b) if found is None else found
    index_a = {n.id: i for i, n in enumerate(graph_a.nodes)}
    index_b = {n.id: i for i, n in enumerate(graph_b.nodes)}
    match_a = [-1] * len(graph_a.nodes)
    match_b = [-1] * len(graph_b.nodes)
    for a, b in found.matched:
        match_a[index_a[a]] = index_b[b]
        match_b[index_b[b]] = index_a[a]
    status_a = ["same" if j >= 0 else "removed" for j in match_a]
    status_b = ["same" if j >= 0 else "added" for j in match_b]
    changes_a: dict[int, list[tuple[str, str, str]]] = {}
    changes_b: dict[int, list[tuple[str, str, str]]] = {}
    for c in found.changes:
        i, j = index_a[c.a], index_b[c.b]
        status_a[i] = status_b[j] = "changed"
        changes_a.setdefault(i, []).append(c.row())
        changes_b.setdefault(j, []).append(c.row())
    return PairView(found, tuple(match_a), tuple(match_b), tuple(status_a), tuple(status_b), changes_a, changes_b)
