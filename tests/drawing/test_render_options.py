"""render/save/export take depth=, roll= and expanded=: what is written is the module view."""

from __future__ import annotations

from pathlib import Path

import pytest
from mv_graphs import encoder_graph

from graphviz_app import render, save
from graphviz_app.drawing.renderer import export
from graphviz_app.errors import CollapseError
from graphviz_app.model import Graph, NodeKind


def test_save_json_with_depth_writes_the_collapsed_graph(tmp_path: Path) -> None:
    path = save(encoder_graph(4), tmp_path / "model.json", depth=1, roll=True)
    graph = Graph.from_json(path.read_text())
    assert [n.name for n in graph.of_kind(NodeKind.MODULE)] == ["layers.0–3: TransformerEncoderLayer ×4"]


def test_save_svg_with_depth_draws_one_box_per_layer(tmp_path: Path) -> None:
    path = save(encoder_graph(3), tmp_path / "model.svg", depth=1, engine="graphviz-pure")
    svg = path.read_text()
    assert [f"layers.{i}: TransformerEncoderLayer" in svg for i in range(3)] == [True] * 3
    assert "AddmmBackward0" not in svg  # every op is inside a box


def test_export_without_module_options_is_the_same_as_before() -> None:
    graph = encoder_graph(2)
    assert export(graph, "dot") == render(graph).source.encode()
    assert export(graph, "json") == graph.to_json(indent=1).encode()


def test_expanded_reaches_render_through_export() -> None:
    dot = export(encoder_graph(2), "dot", depth=1, expanded=frozenset({"layers.1"})).decode()
    assert '"module/layers.1.linear1"' in dot and '"module/layers.0"' in dot


def test_a_bad_depth_is_refused_before_anything_is_drawn(tmp_path: Path) -> None:
    with pytest.raises(CollapseError, match="depth must be a whole number >= 0"):
        save(encoder_graph(1), tmp_path / "x.svg", depth=-2)
    assert not (tmp_path / "x.svg").exists()
