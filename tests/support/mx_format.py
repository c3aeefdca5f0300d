"""Model Explorer's input format, from that format's own description (its graph_builder types): a checker."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["check_model_explorer", "check_node_data"]

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
