"""The Model Explorer export, checked against that format's own description (its graph_builder types)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
from viewer_support import HOSTILE, module_graph

from graphviz_app import save
from graphviz_app.drawing.renderer import export
from graphviz_app.viewer.model_explorer import node_data

# The fields of each record in Model Explorer's own description of its input (its Python package's
# `graph_builder` and `node_data_builder` dataclasses); a key outside these is not part of the format.
COLLECTION = {"label", "graphs", "graphSorting"}
GRAPH = {"id", "nodes", "groupNodeAttributes", "groupNodeConfigs", "nodeLabelsToHide", "tasksData", "layoutConfigs"}
NODE = {"id", "label", "namespace", "subgraphIds", "attrs", "incomingEdges", "outputsMetadata", "inputsMetadata",
        "style", "config"}
INCOMING_EDGE = {"sourceNodeId", "sourceNodeOutputId", "targetNodeInputId"}
METADATA_ITEM = {"id", "attrs"}
NODE_DATA = {"results", "thresholds", "gradient", "hideInAggregatedStatsTable", "hideInChildrenStatsTable",
             "hideAggregatedStats", "showExpandedSummaryOnGroupNode", "showLabelCountColumnsInChildrenStatsTable"}
NODE_DATA_RESULT = {"value", "bgColor", "textColor"}


def _fields(record: Any, allowed: set[str], required: set[str], where: str) -> None:
    assert isinstance(record, dict), f"{where}: expected an object, found {type(record).__name__}"
    assert set(record) <= allowed, f"{where}: keys outside the format: {sorted(set(record) - allowed)}"
    assert required <= set(record), f"{where}: missing {sorted(required - set(record))}"


def _key_values(items: Any, where: str) -> None:
    assert isinstance(items, list), where
    for kv in items:
        _fields(kv, {"key", "value"}, {"key", "value"}, where)
        assert isinstance(kv["key"], str) and isinstance(kv["value"], str), f"{where}: key and value must be text"


def check_model_explorer(data: Any) -> None:
    """A graph collection as Model Explorer's loader takes it: {label, graphs: [Graph]}, Graph {id, nodes},
    GraphNode {id, label, namespace, attrs: [KeyValue], incomingEdges: [IncomingEdge],
    outputsMetadata: [MetadataItem {id, attrs}]}, ids unique, edges naming nodes of the graph."""
    _fields(data, COLLECTION, {"label", "graphs"}, "collection")
    assert isinstance(data["label"], str) and isinstance(data["graphs"], list)
    for graph in data["graphs"]:
        _fields(graph, GRAPH, {"id", "nodes"}, "graph")
        assert isinstance(graph["id"], str)
        ids = [n["id"] for n in graph["nodes"]]
        assert len(ids) == len(set(ids)), "node ids must be unique within a graph"
        for node in graph["nodes"]:
            _fields(node, NODE, {"id", "label"}, f"node {node.get('id')}")
            assert isinstance(node["id"], str) and isinstance(node["label"], str)
            assert isinstance(node.get("namespace", ""), str)
            assert not node.get("namespace", "").startswith("/") and "//" not in node.get("namespace", "")
            _key_values(node.get("attrs", []), node["id"])
            for edge in node.get("incomingEdges", []):
                _fields(edge, INCOMING_EDGE, {"sourceNodeId"}, f"edge into {node['id']}")
                assert edge["sourceNodeId"] in ids, f"edge into {node['id']} from {edge['sourceNodeId']}, no node"
                assert isinstance(edge.get("sourceNodeOutputId", "0"), str)
                assert isinstance(edge.get("targetNodeInputId", "0"), str)
            for item in node.get("outputsMetadata", []):
                _fields(item, METADATA_ITEM, {"id"}, f"outputs of {node['id']}")
                assert isinstance(item["id"], str)
                _key_values(item.get("attrs", []), node["id"])
        for attrs in graph.get("groupNodeAttributes", {}).values():
            assert all(isinstance(k, str) and isinstance(v, str) for k, v in attrs.items())


def check_node_data(data: Any, ids: set[str]) -> None:
    """One graph's node data: {results: {node id: {value: number}}}, every key a node of the graph."""
    _fields(data, NODE_DATA, {"results"}, "node data")
    for key, result in data["results"].items():
        assert key in ids, f"node data for {key}, which is no node of the graph"
        _fields(result, NODE_DATA_RESULT, {"value"}, f"node data for {key}")
        assert isinstance(result["value"], int | float) and math.isfinite(result["value"])


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
    assert {k: attrs[k] for k in meta} == meta  # the node's attributes too: shape, dtype, device, bytes
    assert data["graphs"][0]["groupNodeAttributes"]["blocks/2"]["type"] == "Block"


def test_save_with_format_writes_model_explorer_json_and_node_data_names_ops(tmp_path: Path) -> None:
    path = save(module_graph(2, hostile=True), tmp_path / "g.json", format="model-explorer")
    data = json.loads(path.read_text(encoding="utf-8"))
    check_model_explorer(data)
    assert {n["label"] for n in data["graphs"][0]["nodes"]} >= set(HOSTILE[:2])  # names kept as plain strings
    nd = node_data(module_graph(2))
    ids = {n["id"] for n in data["graphs"][0]["nodes"]}
    for one in nd.values():
        check_node_data(one, ids)
    assert nd["saved_bytes"]["results"]["n3"] == {"value": 32}
    assert set(nd["grad_norm"]["results"]) >= {"n1", "n2", "n3"}


@pytest.mark.parametrize("fmt", ["model-explorer", "html"])
def test_unknown_suffix_with_format_is_refused_clearly(tmp_path: Path, fmt: str) -> None:
    from graphviz_app.errors import UnsupportedFormatError

    with pytest.raises(UnsupportedFormatError, match="cannot tell the format"):
        save(module_graph(1), tmp_path / "g.json", format=fmt + "x")


@pytest.mark.parametrize(("change", "words"), [
    (lambda d: d["graphs"][0]["nodes"][0].update(name="x"), "keys outside the format: ['name']"),
    (lambda d: d["graphs"][0].pop("id"), "missing ['id']"),
    (lambda d: d["graphs"][0]["nodes"][0]["attrs"].append({"key": "k", "value": 1}), "n0: key and value must be text"),
    (lambda d: d["graphs"][0]["nodes"][1]["incomingEdges"].append({"sourceNodeId": "nowhere"}),
     "from nowhere, no node"),
])
def test_the_format_check_refuses_what_model_explorer_would_not_read(change: Any, words: str) -> None:
    data = json.loads(export(module_graph(1), "model-explorer"))
    change(data)
    with pytest.raises(AssertionError, match=re.escape(words)):
        check_model_explorer(data)
