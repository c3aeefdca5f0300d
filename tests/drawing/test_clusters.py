"""Modules drawn as nested Graphviz clusters labelled `name: Type`."""

from __future__ import annotations

import re

import pytest
from mv_graphs import encoder_graph

from graphviz_app.drawing.renderer import export, render
from graphviz_app.model import Edge, Graph, ModuleInfo, Node, NodeKind


def test_each_module_is_a_cluster_nested_in_its_parent() -> None:
    dot = render(encoder_graph(2)).source
    opened = re.findall(r'^(\t+)subgraph "?cluster_([^" ]*)"? \{\n\t+graph \[label=("[^"]*"|\S+) ', dot, re.M)
    found = {name: (len(tabs), label.strip('"')) for tabs, name, label in opened}
    assert found["layers.1.self_attn"] == (4, "layers.1.self_attn: MultiheadAttention")
    assert found["layers.1"] == (3, "layers.1: TransformerEncoderLayer")
    assert found["layers"] == (2, "layers: ModuleList")
    assert found[""] == (1, "TransformerEncoder")
    assert len(found) == len(encoder_graph(2).modules)


def test_saved_tensors_sit_in_the_cluster_of_the_op_that_keeps_them() -> None:
    dot = render(encoder_graph(1)).source
    block = dot.split('subgraph "cluster_layers.0.linear1" {')[1].split("}")[0]
    assert "AddmmBackward0" in block and "self\\n(2, 4) float32 cpu" in block


def test_a_graph_without_modules_draws_exactly_as_without_clusters() -> None:
    graph = Graph((Node("n0", NodeKind.OP, "AddBackward0"), Node("n1", NodeKind.LEAF, "x")), (Edge("n1", "n0"),))
    assert render(graph).source == render(graph, clusters=False).source
    assert "subgraph" not in render(graph).source


def test_clusters_false_draws_no_cluster() -> None:
    assert "subgraph" not in render(encoder_graph(1), clusters=False).source


def test_a_box_sits_in_the_cluster_of_its_parent_module() -> None:
    dot = render(encoder_graph(2), depth=1).source
    block = dot.split("subgraph cluster_layers {")[1]
    assert '"module/layers.0" [label="layers.0: TransformerEncoderLayer' in block
    assert "cluster_layers.0" not in dot


def test_module_names_that_need_quoting_stay_valid_dot() -> None:
    graph = Graph(
        (Node("n0", NodeKind.OP, "AddBackward0", module='odd "name"'),), (), modules=(ModuleInfo('odd "name"', "Odd"),)
    )
    svg = export(graph, "svg", engine="graphviz-pure")
    assert b"odd &quot;name&quot;: Odd" in svg


@pytest.mark.parametrize("engine", ["dot", "graphviz-pure"])
def test_a_clustered_model_lays_out(engine: str) -> None:
    import shutil

    if engine == "dot" and shutil.which("dot") is None:
        pytest.skip("Graphviz's dot is not installed here")
    svg = export(encoder_graph(2), "svg", engine=engine)
    assert b"layers.1: TransformerEncoderLayer" in svg
    assert svg.count(b'class="cluster"') == len(encoder_graph(2).modules)
