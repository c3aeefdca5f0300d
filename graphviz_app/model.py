"""The plain node model of an autograd graph: frozen dataclasses, no torch."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from enum import Enum
from typing import Any

from .errors import SchemaError

__all__ = [
    "SCHEMA_VERSION",
    "NodeKind",
    "EdgeKind",
    "TensorInfo",
    "Node",
    "Edge",
    "Graph",
    "Summary",
    "human_bytes",
]

SCHEMA_VERSION = 1

Scalar = float | int | bool | str


class NodeKind(str, Enum):
    """What a node stands for."""

    OUTPUT = "output"  # a tensor the user asked to trace
    OP = "op"  # a backward function (AddBackward0, ...)
    LEAF = "leaf"  # AccumulateGrad: the leaf tensor whose .grad it fills
    SAVED = "saved"  # a tensor an op saved for its backward
    VIEW_BASE = "view_base"  # the base tensor an output is a view of


class EdgeKind(str, Enum):
    """What an edge carries."""

    DATA = "data"  # a forward value flowing from producer to consumer
    SAVED = "saved"  # a saved tensor attached to the op that keeps it
    VIEW = "view"  # a view's base attached to the view


@dataclass(frozen=True, slots=True)
class TensorInfo:
    """What is known of one tensor, without keeping the tensor.

    `values` holds the flattened values of tensors with at most 16 elements
    (complex, nan and inf values as strings), else None. `storage` names the storage the
    tensor lives in (`s0`, `s1`, ... in walk order) so shared memory is
    counted once. `freed` marks a saved tensor released by `backward()`.
    """

    name: str | None
    shape: tuple[int, ...]
    dtype: str
    device: str
    numel: int
    bytes: int
    requires_grad: bool
    values: tuple[Scalar, ...] | None = None
    storage: str | None = None
    freed: bool = False

    @property
    def shape_text(self) -> str:
        """The shape as people write it: `(3, 4)`, `()` for a scalar."""
        if len(self.shape) == 1:
            return f"({self.shape[0]},)"
        return "(" + ", ".join(str(s) for s in self.shape) + ")"


@dataclass(frozen=True, slots=True)
class Node:
    """One node of the graph.

    `tensor` describes the tensor of output, leaf, saved and view-base
    nodes, and for op nodes the forward result the op produced (no values).
    `attrs` are an op's non-tensor attributes as (name, text) pairs.
    """

    id: str
    kind: NodeKind
    name: str
    tensor: TensorInfo | None = None
    attrs: tuple[tuple[str, str], ...] = ()

    @property
    def device(self) -> str | None:
        return self.tensor.device if self.tensor is not None else None


@dataclass(frozen=True, slots=True)
class Edge:
    """A directed edge in data-flow order: `src` feeds `dst`.

    For data edges, `output_nr` is which output of `src`'s forward flows
    (as `torch.autograd.graph.GradientEdge.output_nr`) and `slot` is the
    position among `dst`'s inputs (its `next_functions` index).
    """

    src: str
    dst: str
    kind: EdgeKind = EdgeKind.DATA
    output_nr: int = 0
    slot: int = 0


@dataclass(frozen=True, slots=True)
class Summary:
    """Counts and totals of a graph, for one-line display."""

    nodes: int
    edges: int
    nodes_by_kind: tuple[tuple[str, int], ...]
    edges_by_kind: tuple[tuple[str, int], ...]
    devices: tuple[str, ...]
    dtypes: tuple[str, ...]
    saved_bytes: int

    def __str__(self) -> str:
        devices = ", ".join(self.devices) or "none"
        return (
            f"{self.nodes} nodes, {self.edges} edges, "
            f"saved tensors {human_bytes(self.saved_bytes)}, devices: {devices}"
        )


@dataclass(frozen=True, slots=True)
class Graph:
    """An autograd graph: nodes in walk order and the edges between them.

    `notes` are remarks from tracing a person should see (ignored
    non-tensor outputs, truncation by `max_nodes`, freed saved tensors).
    """

    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    notes: tuple[str, ...] = ()
    truncated: bool = False

    def node(self, node_id: str) -> Node:
        """The node with this id. Raises KeyError naming the id if absent."""
        for n in self.nodes:
            if n.id == node_id:
                return n
        raise KeyError(f"no node {node_id!r} in this graph")

    def of_kind(self, kind: NodeKind) -> tuple[Node, ...]:
        return tuple(n for n in self.nodes if n.kind is kind)

    def cross_device_ops(self) -> frozenset[str]:
        """Ids of op nodes whose inputs live on another device than their output."""
        by_id = {n.id: n for n in self.nodes}
        found: set[str] = set()
        for e in self.edges:
            if e.kind is not EdgeKind.DATA:
                continue
            dst = by_id[e.dst]
            src_dev, dst_dev = by_id[e.src].device, dst.device
            if dst.kind is NodeKind.OP and src_dev and dst_dev and src_dev != dst_dev:
                found.add(dst.id)
        return frozenset(found)

    def summary(self) -> Summary:
        """Node and edge counts per kind, devices and dtypes, saved bytes."""
        devices: set[str] = set()
        dtypes: set[str] = set()
        storages: dict[str, int] = {}
        for n in self.nodes:
            t = n.tensor
            if t is None or t.freed:  # a freed tensor's device and dtype are "unknown"
                continue
            devices.add(t.device)
            dtypes.add(t.dtype)
            if n.kind is NodeKind.SAVED and not t.freed:
                key = t.storage or n.id
                storages[key] = max(storages.get(key, 0), t.bytes)
        node_kinds = Counter(n.kind.value for n in self.nodes)
        edge_kinds = Counter(e.kind.value for e in self.edges)
        return Summary(
            nodes=len(self.nodes),
            edges=len(self.edges),
            nodes_by_kind=tuple(sorted(node_kinds.items())),
            edges_by_kind=tuple(sorted(edge_kinds.items())),
            devices=tuple(sorted(devices)),
            dtypes=tuple(sorted(dtypes)),
            saved_bytes=sum(storages.values()),
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; `Graph.from_dict` reads it back exactly."""
        return {
            "schema": SCHEMA_VERSION,
            "nodes": [_node_to_dict(n) for n in self.nodes],
            "edges": [[e.src, e.dst, e.kind.value, e.output_nr, e.slot] for e in self.edges],
            "notes": list(self.notes),
            "truncated": self.truncated,
        }

    def to_json(self, *, indent: int | None = None) -> str:
        """Serialize to JSON text (schema version 1, see the README)."""
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Graph:
        version = data.get("schema") if isinstance(data, dict) else None
        if type(version) is not int or version != SCHEMA_VERSION:  # True == 1 in Python
            raise SchemaError(
                f"expected a graph with \"schema\": {SCHEMA_VERSION}, found {version!r}; "
                "was this JSON written by graphviz_app's Graph.to_json()?"
            )
        try:
            return cls(
                nodes=tuple(_node_from_dict(n) for n in data["nodes"]),
                edges=tuple(
                    Edge(src, dst, EdgeKind(kind), output_nr, slot)
                    for src, dst, kind, output_nr, slot in data["edges"]
                ),
                notes=tuple(data.get("notes", ())),
                truncated=bool(data.get("truncated", False)),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise SchemaError(f"malformed graph JSON: {e!r}") from e

    @classmethod
    def from_json(cls, text: str) -> Graph:
        """Read a graph written by `to_json`. Raises SchemaError if it is not one."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise SchemaError(f"not JSON: {e}") from e
        return cls.from_dict(data)

    # Notebook display. The import is deferred so the model itself never
    # depends on the renderer; only drawing does.
    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        from .renderer import export  # raises DotNotFoundError, not graphviz's own

        return {"image/svg+xml": export(self, "svg").decode()}

    def _repr_svg_(self) -> str:
        return self._repr_mimebundle_()["image/svg+xml"]


def human_bytes(n: int) -> str:
    """Bytes as people read them.

    >>> human_bytes(12), human_bytes(2048), human_bytes(3 * 1024**3)
    ('12 B', '2.0 KiB', '3.0 GiB')
    """
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


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
    )


def _node_to_dict(n: Node) -> dict[str, Any]:
    return {
        "id": n.id,
        "kind": n.kind.value,
        "name": n.name,
        "tensor": None if n.tensor is None else _tensor_to_dict(n.tensor),
        "attrs": [list(a) for a in n.attrs],
    }


def _node_from_dict(d: dict[str, Any]) -> Node:
    tensor = d.get("tensor")
    return Node(
        id=d["id"],
        kind=NodeKind(d["kind"]),
        name=d["name"],
        tensor=None if tensor is None else _tensor_from_dict(tensor),
        attrs=tuple((k, v) for k, v in d.get("attrs", ())),
    )
