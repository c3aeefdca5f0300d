"""The plain node model of an autograd graph: frozen dataclasses, no torch."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

from .errors import SchemaError
from .summary import Summary, human_bytes, summarize

if TYPE_CHECKING:
    from .module_summary import ModuleSummary

__all__ = [
    "SCHEMA_VERSION",
    "NodeKind",
    "EdgeKind",
    "TensorInfo",
    "GradInfo",
    "ModuleInfo",
    "Node",
    "Edge",
    "Graph",
    "Summary",
    "human_bytes",
    "STATE_ATTR",
    "MODIFIED_IN_PLACE",
]

SCHEMA_VERSION = 2
# Versions `Graph.from_dict` reads: 1 lacks modules, sources and gradients.
READABLE_SCHEMAS = (1, 2)

Scalar = float | int | bool | str

# A saved node whose tensor torch would not hand out (TensorInfo.freed) says
# why in attrs, as (STATE_ATTR, reason); without it backward() freed it.
STATE_ATTR = "state"
MODIFIED_IN_PLACE = "modified in place"


class NodeKind(str, Enum):
    """What a node stands for."""

    OUTPUT = "output"  # a tensor the user asked to trace
    OP = "op"  # a backward function (AddBackward0, ...)
    LEAF = "leaf"  # AccumulateGrad: the leaf tensor whose .grad it fills
    SAVED = "saved"  # a tensor an op saved for its backward
    VIEW_BASE = "view_base"  # the base tensor an output is a view of
    MODULE = "module"  # a module drawn as one box (collapsed by depth, or rolled repeats)


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
class GradInfo:
    """Statistics of one gradient tensor, as backward computed it.

    `norm`, `max_abs` and `mean_abs` are taken over the finite elements only,
    so they stay real numbers; `nan` and `inf` count the others. `values`
    holds at most 16 elements (nan and inf as text, as in TensorInfo).
    """

    numel: int
    norm: float
    max_abs: float
    mean_abs: float
    nan: int = 0
    inf: int = 0
    zero_fraction: float = 0.0
    values: tuple[Scalar, ...] | None = None

    @property
    def finite(self) -> bool:
        return self.nan == 0 and self.inf == 0


@dataclass(frozen=True, slots=True)
class ModuleInfo:
    """One `nn.Module` seen while recording: qualified name ("" for the root) and class."""

    name: str
    type: str
    params: int = 0
    param_bytes: int = 0


@dataclass(frozen=True, slots=True)
class Node:
    """One node of the graph.

    `tensor` describes the tensor of output, leaf, saved and view-base
    nodes, and for op nodes the forward result the op produced (no values).
    `attrs` are an op's non-tensor attributes as (name, text) pairs.
    `module` is the qualified name of the innermost module whose forward made
    the node ("" the root module, None when unknown), `source` the user's
    line that made it ("model.py:42 in forward"). `grad` is the gradient with
    respect to the node's forward value, when traced with gradients.
    """

    id: str
    kind: NodeKind
    name: str
    tensor: TensorInfo | None = None
    attrs: tuple[tuple[str, str], ...] = ()
    module: str | None = None
    source: str | None = None
    grad: GradInfo | None = None

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
    grad: GradInfo | None = None  # the gradient flowing back along a data edge


@dataclass(frozen=True, slots=True)
class Graph:
    """An autograd graph: nodes in walk order and the edges between them.

    `notes` are remarks from tracing a person should see (ignored
    non-tensor outputs, truncation by `max_nodes`, freed saved tensors).
    `modules` lists the modules seen while recording, in `named_modules()`
    order; `nonfinite_origin` is the id of the node where the gradient first
    became NaN or Inf in backward, when traced with gradients.
    """

    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    notes: tuple[str, ...] = ()
    truncated: bool = False
    modules: tuple[ModuleInfo, ...] = ()
    nonfinite_origin: str | None = None

    def __repr__(self) -> str:
        """One line of counts (the dataclass repr of a ResNet's graph is 100,000+ characters).

        >>> Graph((Node("n0", NodeKind.OUTPUT, "output"),), ())
        <Graph: 1 nodes (1 output), 0 edges; .summary() for memory, .nodes and .edges for the records, save(graph, "graph.svg") to draw it>
        """
        kinds = Counter(n.kind.value for n in self.nodes)
        parts = ", ".join(f"{count} {kind}" for kind, count in sorted(kinds.items()))
        extra = (", truncated" if self.truncated else "") + (
            f", {len(self.notes)} note(s) in .notes" if self.notes else ""
        )
        return (
            f"<Graph: {len(self.nodes)} nodes ({parts or 'none'}), {len(self.edges)} edges{extra}; "
            '.summary() for memory, .nodes and .edges for the records, save(graph, "graph.svg") '
            "to draw it>"
        )

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

    def summary(self, *, saved_traced: bool | None = None) -> Summary:
        """Node and edge counts per kind, devices, dtypes, and memory per device.

        Pass `saved_traced=False` for a graph traced with `show_saved=False`
        so its activation memory reads "not traced", not "0 B" (see `Summary`).
        """
        return summarize(self, saved_traced=saved_traced)

    def module_summary(self) -> ModuleSummary:
        """One row per module (ops, saved bytes, params), in `named_modules()` order; prints as a table."""
        from .module_summary import module_summary  # an analysis on top of the model, loaded on use

        return module_summary(self)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; `Graph.from_dict` reads it back exactly."""
        data: dict[str, Any] = {
            "schema": SCHEMA_VERSION,
            "nodes": [_node_to_dict(n) for n in self.nodes],
            "edges": [_edge_to_list(e) for e in self.edges],
        }
        data.update(self._tail_dict())
        return data

    def _tail_dict(self) -> dict[str, Any]:
        """What `to_dict` holds after the nodes and edges, in its order."""
        data: dict[str, Any] = {"notes": list(self.notes), "truncated": self.truncated}
        if self.modules:
            data["modules"] = [[m.name, m.type, m.params, m.param_bytes] for m in self.modules]
        if self.nonfinite_origin is not None:
            data["nonfinite_origin"] = self.nonfinite_origin
        return data

    def to_json(self, *, indent: int | None = None) -> str:
        """Serialize to JSON text (schema version 2, see the README)."""
        if indent is not None:
            return json.dumps(self.to_dict(), indent=indent)
        # The text of json.dumps(self.to_dict()), written a few thousand
        # records at a time: the dict tree of a million-node graph would take
        # several times the memory of its text.
        tail = json.dumps(self._tail_dict())
        return "".join([
            f'{{"schema": {SCHEMA_VERSION}, "nodes": [', *_json_items(self.nodes, _node_to_dict),
            '], "edges": [', *_json_items(self.edges, _edge_to_list), "], ", tail[1:],
        ])

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Graph:
        version = data.get("schema") if isinstance(data, dict) else None
        if type(version) is not int or version not in READABLE_SCHEMAS:  # True == 1 in Python
            readable = " or ".join(str(v) for v in READABLE_SCHEMAS)
            raise SchemaError(
                f"expected a graph with \"schema\": {readable}, found {version!r}; "
                "was this JSON written by graphviz_app's Graph.to_json()?"
            )
        try:
            return cls(
                nodes=tuple(_node_from_dict(n) for n in data["nodes"]),
                edges=tuple(_edge_from_list(e) for e in data["edges"]),
                notes=tuple(data.get("notes", ())),
                truncated=bool(data.get("truncated", False)),
                modules=tuple(ModuleInfo(*m) for m in data.get("modules", ())),
                nonfinite_origin=data.get("nonfinite_origin"),
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


_JSON_CHUNK = 4096


def _json_items(records: tuple[Any, ...], to_json_ready: Any) -> list[str]:
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
def _node_to_dict(n: Node) -> dict[str, Any]:
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
    return d


def _node_from_dict(d: dict[str, Any]) -> Node:
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
    )


def _edge_to_list(e: Edge) -> list[Any]:
    row: list[Any] = [e.src, e.dst, e.kind.value, e.output_nr, e.slot]
    if e.grad is not None:
        row.append(_grad_to_dict(e.grad))
    return row


def _edge_from_list(row: list[Any]) -> Edge:
    src, dst, kind, output_nr, slot, *rest = row
    if len(rest) > 1:
        raise ValueError(f"an edge has 5 or 6 fields, found {len(row)}")
    return Edge(src, dst, EdgeKind(kind), output_nr, slot, _grad_from_dict(rest[0] if rest else None))
