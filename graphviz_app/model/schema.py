"""The graph's JSON form (schema 2; schema 1 still reads): records to JSON-ready values and back."""

from __future__ import annotations

import json
from typing import Any

from ..errors import SchemaError
from .records import Edge, EdgeKind, GradInfo, Node, NodeKind, TensorInfo

__all__ = [
    "SCHEMA_VERSION",
    "READABLE_SCHEMAS",
    "check_schema",
    "json_items",
    "node_to_dict",
    "node_from_dict",
    "edge_to_list",
    "edge_from_list",
]

SCHEMA_VERSION = 2
# Versions `Graph.from_dict` reads: 1 lacks modules, sources and gradients; 3 is the
# compact, columnar form of 2 (graphviz_app.model.compact).
READABLE_SCHEMAS = (1, 2, 3)


def check_schema(data: Any) -> None:
    """Raise SchemaError unless `data` is a dict of a schema version this code reads."""
    version = data.get("schema") if isinstance(data, dict) else None
    if type(version) is not int or version not in READABLE_SCHEMAS:  # True == 1 in Python
        *first, last = (str(v) for v in READABLE_SCHEMAS)
        readable = f"{', '.join(first)} or {last}" if first else last
        raise SchemaError(
            f"expected a graph with \"schema\": {readable}, found {version!r}; "
            "was this JSON written by graphviz_app's Graph.to_json()?"
        )


_JSON_CHUNK = 4096


def json_items(records: tuple[Any, ...], to_json_ready: Any) -> list[str]:
    """The items of json.dumps([to_json_ready(r) for r in records]), without the brackets, in chunks."""
    parts: list[str] = []
    for start in range(0, len(records), _JSON_CHUNK):
        if start:
            parts.append(", ")
        chunk = [to_json_ready(r) for r in records[start:start + _JSON_CHUNK]]
        parts.append(json.dumps(chunk)[1:-1])
    return parts


def _tensor_to_dict(t: TensorInfo) -> dict[str, Any]:
    return {
        "name": t.name,
        "shape": list(t.shape),
        "dtype": t.dtype,
        "device": t.device,
        "numel": t.numel,
        "bytes": t.bytes,
        "requires_grad": t.requires_grad,
        "values": None if t.values is None else list(t.values),
        "storage": t.storage,
        "freed": t.freed,
        **({} if t.storage_bytes is None else {"storage_bytes": t.storage_bytes}),
        **({"given": True} if t.given else {}),
        **({} if t.sharding is None else {"sharding": t.sharding}),
    }


def _tensor_from_dict(d: dict[str, Any]) -> TensorInfo:
    values = d.get("values")
    return TensorInfo(
        name=d["name"],
        shape=tuple(d["shape"]),
        dtype=d["dtype"],
        device=d["device"],
        numel=d["numel"],
        bytes=d["bytes"],
        requires_grad=d["requires_grad"],
        values=None if values is None else tuple(values),
        storage=d.get("storage"),
        freed=d.get("freed", False),
        storage_bytes=d.get("storage_bytes"),
        given=bool(d.get("given", False)),
        sharding=d.get("sharding"),
    )


def _grad_to_dict(g: GradInfo) -> dict[str, Any]:
    return {
        "numel": g.numel,
        "norm": g.norm,
        "max_abs": g.max_abs,
        "mean_abs": g.mean_abs,
        "nan": g.nan,
        "inf": g.inf,
        "zero_fraction": g.zero_fraction,
        "values": None if g.values is None else list(g.values),
    }


def _grad_from_dict(d: dict[str, Any] | None) -> GradInfo | None:
    if d is None:
        return None
    values = d.get("values")
    return GradInfo(
        numel=d["numel"],
        norm=d["norm"],
        max_abs=d["max_abs"],
        mean_abs=d["mean_abs"],
        nan=d.get("nan", 0),
        inf=d.get("inf", 0),
        zero_fraction=d.get("zero_fraction", 0.0),
        values=None if values is None else tuple(values),
    )


# Schema 2 adds "module", "source" and "grad" to a node, and the gradient as a
# sixth element of an edge, only where they are known: a graph traced without
# record() or gradients writes what schema 1 wrote, apart from the version.
def node_to_dict(n: Node) -> dict[str, Any]:
    d: dict[str, Any] = {
        "id": n.id,
        "kind": n.kind.value,
        "name": n.name,
        "tensor": None if n.tensor is None else _tensor_to_dict(n.tensor),
        "attrs": [list(a) for a in n.attrs],
    }
    if n.module is not None:
        d["module"] = n.module
    if n.source is not None:
        d["source"] = n.source
    if n.grad is not None:
        d["grad"] = _grad_to_dict(n.grad)
    if n.recency is not None:
        d["recency"] = n.recency
    if n.order is not None:
        d["order"] = n.order
    if n.differentiates is not None:
        d["differentiates"] = n.differentiates
    if n.output_bytes is not None:
        d["output_bytes"] = list(n.output_bytes)
    return d


def node_from_dict(d: dict[str, Any]) -> Node:
    tensor = d.get("tensor")
    return Node(
        id=d["id"],
        kind=NodeKind(d["kind"]),
        name=d["name"],
        tensor=None if tensor is None else _tensor_from_dict(tensor),
        attrs=tuple((k, v) for k, v in d.get("attrs", ())),
        module=d.get("module"),
        source=d.get("source"),
        grad=_grad_from_dict(d.get("grad")),
        recency=d.get("recency"),
        order=d.get("order"),
        differentiates=d.get("differentiates"),
        output_bytes=None if d.get("output_bytes") is None else tuple(d["output_bytes"]),
    )


def edge_to_list(e: Edge) -> list[Any]:
    row: list[Any] = [e.src, e.dst, e.kind.value, e.output_nr, e.slot]
    if e.grad is not None:
        row.append(_grad_to_dict(e.grad))
    return row


def edge_from_list(row: list[Any]) -> Edge:
    src, dst, kind, output_nr, slot, *rest = row
    if len(rest) > 1:
        raise ValueError(f"an edge has 5 or 6 fields, found {len(row)}")
    return Edge(src, dst, EdgeKind(kind), output_nr, slot, _grad_from_dict(rest[0] if rest else None))
