"""Fast constructors for the model's frozen records, for the tracer's hot loop.

A frozen dataclass's `__init__` sets each field with `object.__setattr__(self,
"name", value)`, a generic call per field: building Nodes, Edges and
TensorInfos was about a quarter of `trace()`'s time. Each constructor here is
a plain class with the record's exact slots: its `__init__` stores the fields
with ordinary slot assignments, then turns the object into the real record by
`__class__` assignment (CPython allows it between classes with the same slot
layout). The result is the model's own frozen class: equal, hashable and
serialized like one made by the class itself, about three times faster to
build. Arguments are the class's own, in its order.

If the model's fields ever differ from the ones written here, the classes
themselves are used: a model change can make tracing slower, never wrong.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..model import Edge, EdgeKind, Node, NodeKind, TensorInfo

__all__ = ["FAST", "new_edge", "new_node", "new_tensor_info"]


class _NodeMaker:
    __slots__ = ("id", "kind", "name", "tensor", "attrs", "module", "source", "grad", "recency", "order",
                 "differentiates", "output_bytes")

    def __init__(
        self, id: str, kind: NodeKind, name: str, tensor: TensorInfo | None = None,
        attrs: tuple[tuple[str, str], ...] = (), module: str | None = None,
        source: str | None = None, grad: Any = None, recency: int | None = None, order: int | None = None,
        differentiates: str | None = None, output_bytes: tuple[int, ...] | None = None,
    ) -> None:
        self.id = id
        self.kind = kind
        self.name = name
        self.tensor = tensor
        self.attrs = attrs
        self.module = module
        self.source = source
        self.grad = grad
        self.recency = recency
        self.order = order
        self.differentiates = differentiates
        self.output_bytes = output_bytes
        self.__class__ = Node  # type: ignore[assignment]


class _EdgeMaker:
    __slots__ = ("src", "dst", "kind", "output_nr", "slot", "grad")

    def __init__(
        self, src: str, dst: str, kind: EdgeKind = EdgeKind.DATA, output_nr: int = 0,
        slot: int = 0, grad: Any = None,
    ) -> None:
        self.src = src
        self.dst = dst
        self.kind = kind
        self.output_nr = output_nr
        self.slot = slot
        self.grad = grad
        self.__class__ = Edge  # type: ignore[assignment]


class _TensorInfoMaker:
    __slots__ = (
        "name", "shape", "dtype", "device", "numel", "bytes", "requires_grad", "values", "storage",
        "freed", "storage_bytes", "given", "sharding",
    )

    def __init__(
        self, name: str | None, shape: tuple[int, ...], dtype: str, device: str, numel: int,
        bytes: int, requires_grad: bool, values: Any = None, storage: str | None = None,
        freed: bool = False, storage_bytes: int | None = None, given: bool = False, sharding: str | None = None,
    ) -> None:
        self.name = name
        self.shape = shape
        self.dtype = dtype
        self.device = device
        self.numel = numel
        self.bytes = bytes
        self.requires_grad = requires_grad
        self.values = values
        self.storage = storage
        self.freed = freed
        self.storage_bytes = storage_bytes
        self.given = given
        self.sharding = sharding
        self.__class__ = TensorInfo  # type: ignore[assignment]


def _same_layout(maker: type, record: type) -> bool:
    """Whether `maker` stores exactly `record`'s fields and defaults, in slot order, with no hooks."""
    fields = dataclasses.fields(record)
    defaults = tuple(f.default for f in fields if f.default is not dataclasses.MISSING)
    return (
        tuple(f.name for f in fields) == vars(maker).get("__slots__") == getattr(record, "__slots__", None)
        and defaults == getattr(vars(maker).get("__init__"), "__defaults__", None)
        and record.__bases__ == (object,)
        and "__post_init__" not in vars(record)
    )


FAST = all(_same_layout(m, r) for m, r in ((_NodeMaker, Node), (_EdgeMaker, Edge), (_TensorInfoMaker, TensorInfo)))

if FAST:
    new_node: Any = _NodeMaker
    new_edge: Any = _EdgeMaker
    new_tensor_info: Any = _TensorInfoMaker
else:  # pragma: no cover - only when the model's fields change
    new_node, new_edge, new_tensor_info = Node, Edge, TensorInfo
