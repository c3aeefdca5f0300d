"""`Graph.node(id)`: one dict lookup after the first call, on a record that stays frozen, equal and hashable."""

from __future__ import annotations

import dataclasses
import pickle

import pytest
from model_counting import CountingNodes

from graphviz_app.model import Edge, Graph, Node, NodeKind


def chain(n: int, nodes: type[tuple] = tuple) -> Graph:
    made = [Node("n0", NodeKind.OUTPUT, "out")] + [Node(f"n{i}", NodeKind.OP, f"Op{i}") for i in range(1, n)]
    return Graph(nodes=nodes(made), edges=tuple(Edge(f"n{i + 1}", f"n{i}") for i in range(n - 1)))


def test_every_lookup_after_the_first_walks_no_node() -> None:
    CountingNodes.walks = 0
    graph = chain(40_000, CountingNodes)
    names = [graph.node(f"n{i}").name for i in range(1, 40_000)]
    assert names[0] == "Op1" and names[-1] == "Op39999"
    assert CountingNodes.walks == 1  # the index, built once; a scan per call would walk 39,999 times


def test_a_repeated_id_finds_its_first_node() -> None:
    graph = Graph(nodes=(Node("n0", NodeKind.OP, "First"), Node("n0", NodeKind.OP, "Second")), edges=())
    assert graph.node("n0").name == "First"


def test_a_missing_id_is_a_key_error_naming_it() -> None:
    with pytest.raises(KeyError, match="no node 'n9' in this graph"):
        chain(3).node("n9")


def test_the_index_changes_neither_equality_nor_hash_nor_the_repr() -> None:
    looked_up, fresh = chain(5), chain(5)
    looked_up.node("n3")
    assert looked_up == fresh and hash(looked_up) == hash(fresh)
    assert repr(looked_up) == repr(fresh) and "_index" not in repr(looked_up)
    with pytest.raises(dataclasses.FrozenInstanceError):
        looked_up.nodes = ()


def test_a_replaced_graph_looks_up_its_own_nodes() -> None:
    graph = chain(3)
    assert graph.node("n2").name == "Op2"
    renamed = dataclasses.replace(graph, nodes=(*graph.nodes[:2], Node("n2", NodeKind.OP, "Renamed")))
    assert renamed.node("n2").name == "Renamed" and graph.node("n2").name == "Op2"


def test_a_pickled_graph_carries_no_index_and_reads_back_equal() -> None:
    graph = chain(2_000)
    before = len(pickle.dumps(graph))
    graph.node("n1")  # builds the index
    data = pickle.dumps(graph)
    back = pickle.loads(data)
    assert len(data) == before and back == graph and back.node("n1999").name == "Op1999"
