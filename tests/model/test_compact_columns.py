"""The compact columns (schema 3) made in C: the same text as one record at a time, and the shared id -> index map."""

from __future__ import annotations

import json
import re

import pytest
from saved_graphs import every_field_graph

from graphviz_app.model import Edge, Graph, Node, NodeKind, TensorInfo, node_positions, to_compact


def _by_hand(graph: Graph) -> dict[str, list[int]]:
    """The columns the compact form promises, written one record at a time (the reference)."""
    position: dict[str, int] = {}
    for i, n in enumerate(graph.nodes):
        position.setdefault(n.id, i)
    tensors = [n.tensor for n in graph.nodes if n.tensor is not None]
    return {"src": [position[e.src] for e in graph.edges], "dst": [position[e.dst] for e in graph.edges],
            "tensor": [-1 if n.tensor is None else tensors.index(n.tensor) for n in graph.nodes]}


def test_a_repeated_id_finds_its_first_node_as_graph_node_does() -> None:
    graph = Graph((Node("a", NodeKind.OUTPUT, "output"), Node("b", NodeKind.OP, "MulBackward0"),
                   Node("a", NodeKind.OP, "SinBackward0")), ())
    assert node_positions(graph.nodes) == {"a": 0, "b": 1}
    assert graph.nodes[node_positions(graph.nodes)["a"]] is graph.node("a")


def test_columns_hold_each_nodes_tensor_place_and_each_edges_ends() -> None:
    t = TensorInfo("x", (2, 3), "float32", "cpu", 6, 24, True, values=(1.0, 2.0))
    graph = Graph((Node("out", NodeKind.OUTPUT, "output", tensor=t), Node("op", NodeKind.OP, "MulBackward0"),
                   Node("s", NodeKind.SAVED, "self", tensor=TensorInfo(None, (2,), "float16", "cpu", 2, 4, False))),
                  (Edge("op", "out"), Edge("s", "op")))
    data = to_compact(graph)
    expected = _by_hand(graph)
    assert data["edges"]["src"] == expected["src"] == [1, 2]
    assert data["edges"]["dst"] == expected["dst"] == [0, 1]
    assert data["nodes"]["tensor"] == expected["tensor"] == [0, -1, 1]
    assert data["nodes"]["id"] is not None  # ids that are not n0, n1, ... are written
    assert Graph.from_dict(json.loads(json.dumps(data))) == graph


def test_a_given_id_map_gives_the_same_columns_and_every_field_comes_back() -> None:
    graph = every_field_graph()
    data = to_compact(graph, positions=node_positions(graph.nodes))
    assert json.dumps(data) == json.dumps(to_compact(graph))
    assert Graph.from_dict(json.loads(json.dumps(data))) == graph


@pytest.mark.parametrize("end", ["n11", "n1_0", "n 1", "n+1", "x"])
def test_an_edge_to_no_node_is_never_read_as_a_number_from_its_id(end: str) -> None:
    nodes = tuple(Node(f"n{i}", NodeKind.OP, "MulBackward0") for i in range(11))
    with pytest.raises(KeyError, match=re.escape(end)):  # the lookup names the id, as before
        to_compact(Graph(nodes, (Edge("n0", end),)))  # "n1_0" and "n 1" read as the numbers 10 and 1
