"""A graph in Google's Model Explorer format: a graph collection JSON, and node data for its colourings.

Model Explorer reads a JSON file holding a graph collection, ``{"label": str, "graphs": [graph]}``;
a graph is ``{"id": str, "nodes": [node], "groupNodeAttributes": {namespace: {key: value}}}``; a node
is ``{"id", "label", "namespace", "attrs": [{"key", "value"}], "incomingEdges": [{"sourceNodeId",
"sourceNodeOutputId", "targetNodeInputId"}], "outputsMetadata": [{"id", "attrs": [...]}]}``. The
namespace is a path ("layers/0/self_attn") that Model Explorer draws as nested, expandable layers:
here the module path. Its node data files (``{"results": {node id: {"value": number}}}``) colour the
nodes: `node_data` gives one for the bytes saved for backward and one for the gradient norm.
"""

from __future__ import annotations

import json
import math
from typing import Any

from ..model import EdgeKind, Graph, NodeKind, human_bytes

__all__ = ["GRAPH_ID", "to_model_explorer", "model_explorer_json", "node_data"]

GRAPH_ID = "autograd"


def _namespace(module: str | None) -> str:
    """A module's path as a Model Explorer namespace.

    >>> _namespace("layers.0.self_attn"), _namespace(""), _namespace(None)
    ('layers/0/self_attn', '', '')
    """
    if not module:
        return ""
    return "/".join(part.replace("/", "_") for part in module.split("."))


def _kv(key: str, value: object) -> dict[str, str]:
    return {"key": key, "value": str(value)}


def _saved_bytes(graph: Graph) -> dict[str, int]:
    """Per op id: bytes of the live saved tensors it keeps (each storage once)."""
    by_id = {n.id: n for n in graph.nodes}
    found: dict[str, dict[str, int]] = {}
    for e in graph.edges:
        if e.kind is EdgeKind.SAVED:
            t = by_id[e.src].tensor
            if t is not None and not t.freed:
                found.setdefault(e.dst, {})[t.storage or e.src] = t.storage_bytes or t.bytes
    return {op: sum(storages.values()) for op, storages in found.items()}


def to_model_explorer(graph: Graph, *, label: str = "autograd graph") -> dict[str, Any]:
    """`graph` as a Model Explorer graph collection (see the module docstring).

    >>> from graphviz_app.model import Edge, Node
    >>> g = Graph((Node("n0", NodeKind.OUTPUT, "output"), Node("n1", NodeKind.OP, "MulBackward0", module="fc")),
    ...           (Edge("n1", "n0"),))
    >>> nodes = to_model_explorer(g)["graphs"][0]["nodes"]
    >>> nodes[1]["namespace"], nodes[0]["incomingEdges"]
    ('fc', [{'sourceNodeId': 'n1', 'sourceNodeOutputId': '0', 'targetNodeInputId': '0'}])
    """
    modules = {m.name: m for m in graph.modules}
    saved = _saved_bytes(graph)
    incoming: dict[str, list[dict[str, str]]] = {}
    module_of_saved: dict[str, str | None] = {}
    by_id = {n.id: n for n in graph.nodes}
    for e in graph.edges:
        target_input = str(e.slot) if e.kind is EdgeKind.DATA else f"{e.kind.value}:{e.src}"
        incoming.setdefault(e.dst, []).append(
            {"sourceNodeId": e.src, "sourceNodeOutputId": str(e.output_nr), "targetNodeInputId": target_input})
        if e.kind is EdgeKind.SAVED:  # a saved tensor sits with the op that keeps it
            module_of_saved.setdefault(e.src, by_id[e.dst].module)
    nodes = []
    for n in graph.nodes:
        module = n.module if n.module is not None else module_of_saved.get(n.id)
        t = n.tensor
        attrs = [_kv("kind", n.kind.value)]
        if t is not None:  # also in outputsMetadata; as attributes they show (and match) in its node search
            attrs += [_kv("shape", t.shape_text), _kv("dtype", t.dtype), _kv("device", t.device), _kv("bytes", t.bytes)]
            if t.sharding is not None:  # a rank's shard of a distributed tensor: how the whole is laid out
                attrs.append(_kv("sharding", t.sharding))
        attrs += [_kv(k, v) for k, v in n.attrs]
        if module is not None:
            info = modules.get(module)
            attrs.append(_kv("module", module or "(root)"))
            if info is not None and info.type:
                attrs.append(_kv("module type", info.type))
        if n.source:
            attrs.append(_kv("source", n.source))
        if n.id in saved:
            attrs.append(_kv("saved bytes", saved[n.id]))
        if n.grad is not None:
            g = n.grad
            attrs += [_kv("gradient norm", g.norm), _kv("gradient nan", g.nan), _kv("gradient inf", g.inf)]
        node: dict[str, Any] = {"id": n.id, "label": n.name, "namespace": _namespace(module), "attrs": attrs,
                                "incomingEdges": incoming.get(n.id, [])}
        if t is not None:
            node["outputsMetadata"] = [{"id": "0", "attrs": [
                _kv("shape", t.shape_text), _kv("dtype", t.dtype), _kv("device", t.device), _kv("bytes", t.bytes),
                *([_kv("tensor_name", t.name)] if t.name else []),
            ]}]
        nodes.append(node)
    groups = {}
    for name, info in modules.items():
        if name:
            groups[_namespace(name)] = {"module": name, "type": info.type, "params": f"{info.params:,}",
                                        "param bytes": human_bytes(info.param_bytes)}
    out: dict[str, Any] = {"id": GRAPH_ID, "nodes": nodes}
    if groups:
        out["groupNodeAttributes"] = groups
    return {"label": label, "graphs": [out]}


def model_explorer_json(graph: Graph, *, label: str = "autograd graph") -> str:
    """`to_model_explorer` as JSON text (NaN-free: Model Explorer reads standard JSON)."""
    return json.dumps(to_model_explorer(graph, label=label), indent=1, default=str)


def node_data(graph: Graph) -> dict[str, dict[str, Any]]:
    """Model Explorer node data files: "saved_bytes" (ops) and, when traced with gradients, "grad_norm".

    Each is ``{"results": {node id: {"value": number}}}``, to load beside the graph in Model Explorer.
    """
    found: dict[str, dict[str, Any]] = {
        "saved_bytes": {"results": {op: {"value": b} for op, b in _saved_bytes(graph).items()}}}
    norms = {n.id: {"value": n.grad.norm} for n in graph.nodes
             if n.grad is not None and n.kind is not NodeKind.SAVED and math.isfinite(n.grad.norm)}
    if norms:
        found["grad_norm"] = {"results": norms}
    return found
