"""The page's memory panel on a 40,000-node upload: labels by dict lookup, not a scan of the nodes per step."""

from __future__ import annotations

from model_counting import CountingNodes

from graphviz_app.analysis.memory import memory_timeline
from graphviz_app.model import Edge, EdgeKind, Graph, Node, NodeKind, TensorInfo
from graphviz_app.web.memory_view import memory_panel_of


def _saving_chain(nodes: int) -> Graph:
    """output <- op <- op ...: each op keeps one saved tensor of its own, so every op is a backward step."""
    def tensor(i: int) -> TensorInfo:
        return TensorInfo(None, (8,), "float32", "cpu", 8, 32, False, storage=f"s{i}")

    made = [Node("n0", NodeKind.OUTPUT, "out", tensor=tensor(0))]
    edges = []
    for i in range(1, nodes // 2):
        op, saved = f"n{2 * i - 1}", f"n{2 * i}"
        made += [Node(op, NodeKind.OP, "MulBackward0", module="block"), Node(saved, NodeKind.SAVED, "self",
                                                                              tensor=tensor(i))]
        edges += [Edge(saved, op, EdgeKind.SAVED), Edge(op, f"n{2 * i - 3}" if i > 1 else "n0")]
    return Graph(nodes=CountingNodes(made), edges=tuple(edges))


def test_a_40000_node_panel_walks_the_nodes_once_for_its_labels() -> None:
    graph = _saving_chain(40_000)
    timeline = memory_timeline(graph)
    CountingNodes.walks = 0
    panel = memory_panel_of(graph, timeline)
    assert len(panel.labels) == 19_999  # one label per op the timeline steps through
    assert dict(panel.labels)["n39997"] == "MulBackward0 (n39997) in block"
    assert CountingNodes.walks <= 1  # building the id index; a scan per label walked them 19,999 times
