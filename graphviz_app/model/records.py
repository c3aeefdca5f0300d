"""The records an autograd graph is made of: nodes, edges, tensors, gradients, modules."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

__all__ = [
    "Scalar",
    "NodeKind",
    "EdgeKind",
    "TensorInfo",
    "GradInfo",
    "ModuleInfo",
    "Node",
    "Edge",
]

Scalar = float | int | bool | str


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
    `given` marks a tensor whose storage existed before the step that traced it
    (a parameter, buffer or input given to the model), known when traced with `trace_model`.
    `sharding` (a rank of a distributed job) says how the whole tensor is laid out over
    the ranks, e.g. `Shard(dim=0) of (1024, 256) on mesh (2)`: shape, bytes and storage are
    then this rank's local shard.
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
    storage_bytes: int | None = None
    given: bool = False
    sharding: str | None = None

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
    `recency` (ops only) counts the autograd nodes the forward made after this op,
    up to the output's op (0): backward runs the ready op of least recency first.
    `order` (ops made by a backward run with `create_graph=True`, recorded under
    `record_orders()`): 1 for the forward's backward, 2 for the backward of that, ...;
    `differentiates` is the id of the node whose backward made this one.
    `output_bytes` (ops with several forward outputs, when an output past the
    first feeds another node) gives the bytes of each output, by `output_nr`:
    the gradient backward sends to output k has that size.
    """

    id: str
    kind: NodeKind
    name: str
    tensor: TensorInfo | None = None
    attrs: tuple[tuple[str, str], ...] = ()
    module: str | None = None
    source: str | None = None
    grad: GradInfo | None = None
    recency: int | None = None
    order: int | None = None
    differentiates: str | None = None
    output_bytes: tuple[int, ...] | None = None

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
