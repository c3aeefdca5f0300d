"""The Model Explorer export, checked against that format's own description (its graph_builder types)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from mx_format import check_model_explorer, check_node_data
from viewer_support import HOSTILE, module_graph

from graphviz_app import save
from graphviz_app.drawing.renderer import export
from graphviz_app.viewer.model_explorer import node_data


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
