"""What a backward node allocates beyond the gradients it returns, as recorded on the graph when the step ran."""

from __future__ import annotations

from collections.abc import Iterable

from ...model import Node, NodeKind
from ...model.annotations import NESTED_GRADS_ATTR, REENTRANT_KEEPS_ATTR, TEMPORARIES_ATTR

__all__ = ["TEMPORARIES_ATTR", "NESTED_GRADS_ATTR", "REENTRANT_KEEPS_ATTR", "read_op_bytes", "read_op_attrs"]


def read_op_bytes(nodes: Iterable[Node]) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
    """(node id -> temporaries' bytes, -> bytes a nested backward left, -> bytes a reentrant checkpoint keeps)
    for the ops that have them."""
    temporaries: dict[str, int] = {}
    nested: dict[str, int] = {}
    keeps: dict[str, int] = {}
    for n in nodes:
        if n.attrs and n.kind is NodeKind.OP:
            read_op_attrs(n, temporaries, nested, keeps)
    return temporaries, nested, keeps


def read_op_attrs(n: Node, temporaries: dict[str, int], nested: dict[str, int], keeps: dict[str, int]) -> None:
    """Add op `n`'s recorded bytes (if any) to the three tables `read_op_bytes` returns."""
    for name, text in n.attrs:
        if name == TEMPORARIES_ATTR:
            temporaries[n.id] = int(text)
        elif name == NESTED_GRADS_ATTR:
            nested[n.id] = int(text)
        elif name == REENTRANT_KEEPS_ATTR:
            keeps[n.id] = int(text)
