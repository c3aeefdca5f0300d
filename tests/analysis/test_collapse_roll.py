"""collapse(roll=True): consecutive identical sibling modules fold into one box marked ×k."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from mv_graphs import encoder_graph, tensor

from graphviz_app.analysis.collapse import collapse
from graphviz_app.drawing.renderer import render
from graphviz_app.model import Edge, Graph, ModuleInfo, Node, NodeKind

GOLDEN = Path(__file__).parent / "golden"


def _boxes(graph: Graph) -> list[Node]:
    return [n for n in graph.nodes if n.kind is NodeKind.MODULE]


@pytest.mark.parametrize("depth", [None, 2, 3])
def test_a_100_layer_encoder_rolls_into_one_box(depth: int | None) -> None:
    graph = collapse(encoder_graph(100), depth=depth, roll=True)
    assert [n.kind for n in graph.nodes] == [NodeKind.OUTPUT, NodeKind.OP, NodeKind.MODULE, NodeKind.LEAF]
    box = _boxes(graph)[0]
    assert box.name == "layers.0–99: TransformerEncoderLayer ×100"
    assert box.module == "layers.0"
    facts = dict(box.attrs)
    assert facts["stands for"] == "layers.0–99"
    assert facts["ops"] == "1,100"
    assert facts["params"] == "14,000 (54.7 KiB)"


def test_roll_without_depth_keeps_the_rest_of_the_graph_as_it_was() -> None:
    graph = collapse(encoder_graph(5), roll=True)
    assert [(e.src, e.dst) for e in graph.edges] == [
        ("n1", "n0"), ("module/layers.0", "n1"), (graph.nodes[-1].id, "module/layers.0")
    ]


def _with_layer(graph: Graph, layer: str, change: str) -> Graph:
    """`graph` with one op of `layer` renamed (a different inside) or its type changed."""
    if change == "op":
        node = next(n for n in graph.nodes if n.module == f"{layer}.linear1")
        nodes = tuple(dataclasses.replace(n, name="MmBackward0") if n is node else n for n in graph.nodes)
        return dataclasses.replace(graph, nodes=nodes)
    if change == "shape":
        node = next(n for n in graph.nodes if n.module == f"{layer}.linear1")
        nodes = tuple(dataclasses.replace(n, tensor=tensor((2, 8))) if n is node else n for n in graph.nodes)
        return dataclasses.replace(graph, nodes=nodes)
    modules = tuple(dataclasses.replace(m, type="Custom") if m.name == layer else m for m in graph.modules)
    return dataclasses.replace(graph, modules=modules)


@pytest.mark.parametrize("change", ["op", "shape", "type"])
def test_a_layer_that_differs_splits_the_run(change: str) -> None:
    graph = collapse(_with_layer(encoder_graph(10), "layers.4", change), depth=2, roll=True)
    rolled = [n.name for n in _boxes(graph) if "×" in n.name]
    assert rolled == ["layers.5–9: TransformerEncoderLayer ×5", "layers.0–3: TransformerEncoderLayer ×4"]
    assert "layers.4.linear1: Linear" in [n.name for n in _boxes(graph)]  # drawn on its own, open at depth 2


def test_siblings_that_do_not_feed_each_other_are_not_rolled() -> None:
    # Two identical branches side by side (a = relu(x), b = relu(x); out = a + b): alike, not a chain.
    nodes = (
        Node("n0", NodeKind.OP, "AddBackward0", module=""),
        Node("n1", NodeKind.OP, "ReluBackward0", module="a"),
        Node("n2", NodeKind.OP, "ReluBackward0", module="b"),
        Node("n3", NodeKind.LEAF, "x"),
    )
    edges = (Edge("n1", "n0"), Edge("n2", "n0", slot=1), Edge("n3", "n1"), Edge("n3", "n2"))
    modules = (ModuleInfo("", "Net"), ModuleInfo("a", "ReLU"), ModuleInfo("b", "ReLU"))
    graph = Graph(nodes, edges, modules=modules)
    assert collapse(graph, roll=True) == graph


def test_an_expanded_module_is_left_out_of_the_run() -> None:
    graph = collapse(encoder_graph(6), depth=1, roll=True, expanded=frozenset({"layers.0"}))
    titles = [n.name for n in _boxes(graph)]
    assert titles[0] == "layers.1–5: TransformerEncoderLayer ×5"
    assert "layers.0.linear1: Linear" in titles  # layers.0 is open, its children are boxes


def test_non_numbered_runs_list_the_modules_they_stand_for() -> None:
    nodes = tuple(
        Node(f"n{i}", NodeKind.OP, "ReluBackward0", module=name) for i, name in enumerate(["d", "c", "b", "a"])
    )
    edges = tuple(Edge(f"n{i + 1}", f"n{i}") for i in range(3))
    modules = (ModuleInfo("", "Net"),) + tuple(ModuleInfo(name, "ReLU") for name in "abcd")
    box = collapse(Graph(nodes, edges, modules=modules), roll=True).nodes[0]
    assert box.name == "a … d: ReLU ×4"
    assert dict(box.attrs)["stands for"] == "a, b, c, d"


def test_golden_dot_of_a_small_rolled_model() -> None:
    dot = render(encoder_graph(3), depth=2, roll=True).source
    assert dot == (GOLDEN / "encoder3_depth2_roll.dot").read_text(encoding="utf-8")


def test_golden_dot_of_a_small_model_at_depth_2_with_clusters() -> None:
    dot = render(encoder_graph(1, saved=False), depth=2).source
    assert dot == (GOLDEN / "encoder1_depth2.dot").read_text(encoding="utf-8")
