"""What a backward node allocates beyond the gradients it returns, as recorded on the graph when the step ran."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ...model import Node, NodeKind
from ...model.annotations import (
    GRADIENT_COPIED_ATTR,
    NESTED_GRADS_ATTR,
    NESTED_LEAF_GRADS_ATTR,
    REENTRANT_KEEPS_ATTR,
    TEMPORARIES_ATTR,
)

__all__ = ["TEMPORARIES_ATTR", "NESTED_GRADS_ATTR", "NESTED_LEAF_GRADS_ATTR", "REENTRANT_KEEPS_ATTR",
           "GRADIENT_COPIED_ATTR", "RECORDED_ATTRS", "OpBytesRead", "read_op_bytes", "read_op_attrs"]

# The names this module reads: an op with none of them in its attrs recorded nothing.
RECORDED_ATTRS = frozenset({TEMPORARIES_ATTR, NESTED_GRADS_ATTR, NESTED_LEAF_GRADS_ATTR, REENTRANT_KEEPS_ATTR,
                            GRADIENT_COPIED_ATTR})


@dataclass(slots=True)
class OpBytesRead:
    """The recorded bytes of a graph's ops, by op id: `temporaries`, the bytes a nested backward left (`nested`),
    of them the `.grad` it made for leaves of the graph (`nested_leaves`: [(leaf id, bytes)]), what a
    reentrant checkpoint keeps (`keeps`), and the bytes a view's backward copied its gradient into (`copied`)."""

    temporaries: dict[str, int] = field(default_factory=dict)
    nested: dict[str, int] = field(default_factory=dict)
    nested_leaves: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    keeps: dict[str, int] = field(default_factory=dict)
    copied: dict[str, int] = field(default_factory=dict)


def read_op_bytes(nodes: Iterable[Node]) -> OpBytesRead:
    """The recorded bytes of the ops that have them.

    >>> n = Node("n2", NodeKind.OP, "CheckpointFunctionBackward",
    ...          attrs=((NESTED_GRADS_ATTR, "96"), (NESTED_LEAF_GRADS_ATTR, "n6=64")))
    >>> read = read_op_bytes([n])
    >>> read.nested, read.nested_leaves
    ({'n2': 96}, {'n2': [('n6', 64)]})
    """
    found = OpBytesRead()
    for n in nodes:
        if n.attrs and n.kind is NodeKind.OP:
            read_op_attrs(n, found)
    return found


def read_op_attrs(n: Node, found: OpBytesRead) -> None:
    """Add op `n`'s recorded bytes (if any) to `found`."""
    for name, text in n.attrs:
        if name == TEMPORARIES_ATTR:
            found.temporaries[n.id] = int(text)
        elif name == NESTED_GRADS_ATTR:
            found.nested[n.id] = int(text)
        elif name == NESTED_LEAF_GRADS_ATTR:
            found.nested_leaves[n.id] = [(leaf, int(size)) for leaf, _, size in
                                         (item.rpartition("=") for item in text.split())]
        elif name == REENTRANT_KEEPS_ATTR:
            found.keeps[n.id] = int(text)
        elif name == GRADIENT_COPIED_ATTR:
            found.copied[n.id] = int(text)
