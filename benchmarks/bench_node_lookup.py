"""The page's memory panel of big uploads: `Graph.node` by its cached index beside a scan of the nodes per call.

Run: .venv/bin/python benchmarks/bench_node_lookup.py [--sizes 5000 10000 20000 40000]

For each size, a chain of ops each keeping one saved tensor (half the nodes ops, so every op is a
backward step) is built by hand, its memory timeline computed once, then the panel's labels
(`graphviz_app.web.memory_view.memory_panel_of`, one `graph.node(id)` per step) are made twice in
one run: with `Graph.node` as it is (an id -> node index built on the first call) and with the scan
it replaced (the peer, a subclass). CPU seconds (`time.process_time`). Not a test.
"""

from __future__ import annotations

import argparse
import sys

from timing import cpu_seconds

from graphviz_app.analysis.memory import memory_timeline
from graphviz_app.model import Edge, EdgeKind, Graph, Node, NodeKind, TensorInfo
from graphviz_app.web.memory_view import memory_panel_of


class ScanGraph(Graph):
    """The lookup before the index: a walk over the nodes on every call."""

    def node(self, node_id: str) -> Node:
        for n in self.nodes:
            if n.id == node_id:
                return n
        raise KeyError(node_id)


def saving_chain(size: int, cls: type[Graph] = Graph) -> Graph:
    nodes = [Node("n0", NodeKind.OUTPUT, "out")]
    edges = []
    for i in range(1, size // 2):
        op, saved = f"n{2 * i - 1}", f"n{2 * i}"
        tensor = TensorInfo(None, (8,), "float32", "cpu", 8, 32, False, storage=f"s{i}")
        nodes += [Node(op, NodeKind.OP, "MulBackward0"), Node(saved, NodeKind.SAVED, "self", tensor=tensor)]
        edges += [Edge(saved, op, EdgeKind.SAVED), Edge(op, f"n{2 * i - 3}" if i > 1 else "n0")]
    return cls(nodes=tuple(nodes), edges=tuple(edges))


def panel_seconds(graph: Graph) -> float:
    timeline = memory_timeline(graph)
    return cpu_seconds(lambda: memory_panel_of(graph, timeline))[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[5_000, 10_000, 20_000, 40_000])
    args = parser.parse_args()
    print(f"{'nodes':>7} {'index, s':>9} {'scan, s':>9} {'scan / index':>13}")
    for size in args.sizes:
        indexed, scanned = panel_seconds(saving_chain(size)), panel_seconds(saving_chain(size, ScanGraph))
        print(f"{size:>7,} {indexed:>9.3f} {scanned:>9.2f} {scanned / max(indexed, 1e-9):>12.0f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
