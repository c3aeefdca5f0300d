"""What laying out a drawn graph will cost, measured from the graph before any layout runs.

Graphviz's `dot` spends its time in network simplex over an auxiliary graph
with a node per drawn node, per edge segment and per *virtual* node: an edge
spanning k ranks passes k - 1 of them. A weight read by every step of an
unrolled GRU spans hundreds of ranks, so an 805-node graph can stand for
40,000 auxiliary nodes, which is why node count alone misjudged it. The model
(benchmarks/README.md, section "layout-budget"): CPU seconds = a * work ** p with
work = nodes + edges + 2 * virtual nodes, fitted on dot 2.43 and graphviz-pure
0.2.2; clusters were measured and cost nothing extra on these graphs.
"""

from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass

from ..analysis.module_tree import node_modules
from ..model import Graph

__all__ = ["LayoutCost", "measure", "ENGINE_FIT", "load_factor"]

# engine -> (a, p): CPU seconds = a * work ** p (benchmarks/bench_layout_budget.py).
ENGINE_FIT = {
    "dot": (45.7 / 17_846**2.63, 2.63),
    "graphviz-pure": (16.6 / 17_846**2.12, 2.12),
}


@dataclass(frozen=True, slots=True)
class LayoutCost:
    """The size of a drawn graph as a layout program sees it.

    `virtual` is the number of virtual nodes long edges add (estimated from a
    ranking like dot's), `clusters` the module frames drawn, `work` the
    auxiliary graph's size that the time grows with.
    """

    nodes: int
    edges: int
    virtual: int
    clusters: int

    @property
    def work(self) -> int:
        return self.nodes + self.edges + 2 * self.virtual

    def seconds(self, engine: str) -> float:
        """Predicted CPU seconds for `engine` ("dot" or "graphviz-pure") on an idle core.

        >>> LayoutCost(nodes=10, edges=9, virtual=0, clusters=0).seconds("dot") < 0.01
        True
        """
        a, p = ENGINE_FIT[engine]
        return a * float(self.work) ** p

    def __str__(self) -> str:
        frames = f", {self.clusters:,} module frames" if self.clusters else ""
        return f"{self.nodes:,} nodes, {self.edges:,} edges, long edges crossing {self.virtual:,} ranks{frames}"


def load_factor() -> float:
    """How much slower than an idle core a layout runs now: the 1-minute load per core, at least 1."""
    try:
        load = os.getloadavg()[0]
    except (OSError, AttributeError):  # not on this platform
        return 1.0
    return max(1.0, load / (os.cpu_count() or 1))


def measure(graph: Graph, *, clusters: bool = True, legend: bool = True) -> LayoutCost:
    """The layout cost of `graph` as `render` would draw it (add the legend node, count module frames).

    Ranks are estimated as `dot` assigns them: the longest path from the
    sources, then each node with at least as many consumers as inputs moved
    down next to its first consumer (a saved tensor beside its op, a weight
    beside its first use). Virtual nodes are the ranks each edge skips.

    >>> from graphviz_app.model import Edge, Graph, Node, NodeKind
    >>> chain = [Node(f"n{i}", NodeKind.OP, "Op") for i in range(4)]
    >>> w = Node("w", NodeKind.LEAF, "weight")
    >>> g = Graph((*chain, w), (Edge("n0", "n1"), Edge("n1", "n2"), Edge("n2", "n3"), Edge("w", "n3"), Edge("w", "n1")))
    >>> measure(g, legend=False)
    LayoutCost(nodes=5, edges=5, virtual=2, clusters=0)
    """
    ranks = _ranks(graph)
    virtual = sum(max(ranks[e.dst] - ranks[e.src] - 1, 0) for e in graph.edges if e.src in ranks and e.dst in ranks)
    frames = 0
    if clusters:
        names = {m for m in node_modules(graph).values() if m is not None}
        frames = len({a for m in names for a in _prefixes(m)})
    return LayoutCost(nodes=len(graph.nodes) + (1 if legend and graph.nodes else 0), edges=len(graph.edges),
                      virtual=virtual, clusters=frames)


def _prefixes(name: str) -> list[str]:
    parts = name.split(".") if name else []
    return [""] + [".".join(parts[: i + 1]) for i in range(len(parts))]


def _ranks(graph: Graph) -> dict[str, int]:
    """Node id -> rank: longest path from the sources, sources pulled down to their first consumer."""
    out: dict[str, list[str]] = {n.id: [] for n in graph.nodes}
    indegree = dict.fromkeys(out, 0)
    for e in graph.edges:
        if e.src != e.dst and e.src in out and e.dst in out:
            out[e.src].append(e.dst)
            indegree[e.dst] += 1
    inputs = dict(indegree)
    rank = dict.fromkeys(out, 0)
    order: list[str] = []
    ready = deque(nid for nid, d in indegree.items() if d == 0)
    while ready:
        nid = ready.popleft()
        order.append(nid)
        for dst in out[nid]:
            rank[dst] = max(rank[dst], rank[nid] + 1)
            indegree[dst] -= 1
            if indegree[dst] == 0:
                ready.append(dst)
    for nid in reversed(order):  # consumers first: each sees its consumers' final ranks
        if out[nid] and len(out[nid]) >= inputs[nid]:
            rank[nid] = max(rank[nid], min(rank[d] for d in out[nid]) - 1)
    return rank
