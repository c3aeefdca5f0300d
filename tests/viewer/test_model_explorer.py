"""The Model Explorer export, checked against that format's own description (its graph_builder types)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from viewer_support import HOSTILE, module_graph

from graphviz_app import save
from graphviz_app.drawing.renderer import export
from graphviz_app.viewer.model_explorer import node_data


def _key_values(items: Any, where: str) -> None:
    assert isinstance(items, list), where
    for kv in items:
        assert set(kv) == {"key", "value"} and isinstance(kv["key"], str) and isinstance(kv["value"], str), where


def check_model_explorer(data: Any) -> None:
    """A graph collection as Model Explorer's loader takes it: {label, graphs: [Graph]}, Graph {id, nodes},
    GraphNode {id, label, namespace, attrs: [KeyValue], incomingEdges: [IncomingEdge],
    outputsMetadata: [MetadataItem {id, attrs}]}, ids unique, edges naming nodes of the graph."""
    assert isinstance(data["label"], str) and isinstance(data["graphs"], list)
    for graph in data["graphs"]:
        assert isinstance(graph["id"], str)
        ids = [n["id"] for n in graph["nodes"]]
        assert len(ids) == len(set(ids)), "node ids must be unique within a graph"
        for node in graph["nodes"]:
            assert isinstance(node["id"], str) and isinstance(node["label"], str)
            assert isinstance(node.get("namespace", ""), str)
            assert not node.get("namespace", "").startswith("/") and "//" not in node.get("namespace", "")
            _key_values(node.get("attrs", []), node["id"])
            for edge in node.get("incomingEdges", []):
                assert edge["sourceNodeId"] in ids
                assert isinstance(edge.get("sourceNodeOutputId", "0"), str)
                assert isinstance(edge.get("targetNodeInputId", "0"), str)
            for item in node.get("outputsMetadata", []):
                assert isinstance(item["id"], str)
                _key_values(item.get("attrs", []), node["id"])
        for attrs in graph.get("groupNodeAttributes", {}).values():
            assert all(isinstance(k, str) and isinstance(v, str) for k, v in attrs.items())


def test_export_is_a_model_explorer_graph_collection_with_the_module_hierarchy() -> None:
    data = json.loads(export(module_graph(3), "model-explorer"))
    check_model_explorer(data)
    nodes = {n["id"]: n for n in data["graphs"][0]["nodes"]}
    assert nodes["n2"]["namespace"] == "blocks/2/act"  # module path as nested layers
    assert nodes["n5"]["namespace"] == "blocks/2/fc"  # the saved tensor sits with its op
    meta = {kv["key"]: kv["value"] for kv in nodes["n3"]["outputsMetadata"][0]["attrs"]}
    assert meta == {"shape": "(2, 4)", "dtype": "float32", "device": "cpu", "bytes": "32"}
    attrs = {kv["key"]: kv["value"] for kv in nodes["n3"]["attrs"]}
    assert attrs["saved bytes"] == "32" and attrs["gradient norm"] == "0.5" and attrs["module type"] == "Linear"
    assert data["graphs"][0]["groupNodeAttributes"]["blocks/2"]["type"] == "Block"


def test_save_with_format_writes_model_explorer_json_and_node_data_names_ops(tmp_path: Path) -> None:
    path = save(module_graph(2, hostile=True), tmp_path / "g.json", format="model-explorer")
    data = json.loads(path.read_text(encoding="utf-8"))
    check_model_explorer(data)
    assert {n["label"] for n in data["graphs"][0]["nodes"]} >= set(HOSTILE[:2])  # names kept as plain strings
    nd = node_data(module_graph(2))
    assert nd["saved_bytes"]["results"]["n3"] == {"value": 32}
    assert set(nd["grad_norm"]["results"]) >= {"n1", "n2", "n3"}


@pytest.mark.parametrize("fmt", ["model-explorer", "html"])
def test_unknown_suffix_with_format_is_refused_clearly(tmp_path: Path, fmt: str) -> None:
    from graphviz_app.errors import UnsupportedFormatError

    with pytest.raises(UnsupportedFormatError, match="cannot tell the format"):
        save(module_graph(1), tmp_path / "g.json", format=fmt + "x")
