"""What a backward node allocates beyond the gradients it returns, as recorded on the graph when the step ran."""

from __future__ import annotations

from collections.abc import Iterable

from ...model import Node, NodeKind

__all__ = ["TEMPORARIES_ATTR", "NESTED_GRADS_ATTR", "REENTRANT_KEEPS_ATTR", "read_op_bytes"]

# On an op: the most bytes its backward had alive at once beyond what it left alive when it returned (the
# temporaries it made and freed inside: a pow in PowBackward0, a cast under autocast, a reentrant checkpoint's
# recompute and nested backward), counted as the step ran (`measure`, or `forecast` on meta).
TEMPORARIES_ATTR = "backward temporaries"
# On a reentrant checkpoint's node (CheckpointFunctionBackward): the bytes its nested backward left alive
# beyond the gradients the node returns (the `.grad` of the block's parameters, not in the outer graph).
NESTED_GRADS_ATTR = "nested backward .grad"
# On a reentrant checkpoint's node: the bytes of tensors its block took inside other arguments (a tuple of
# rotary cos and sin) that the checkpoint keeps as they are (not saved tensors) and nothing else in the graph
# describes; alive for the whole step (the node keeps them until the graph is freed).
REENTRANT_KEEPS_ATTR = "checkpoint keeps"


def read_op_bytes(nodes: Iterable[Node]) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
    """(node id -> temporaries' bytes, -> bytes a nested backward left, -> bytes a reentrant checkpoint keeps)
    for the ops that have them."""
    temporaries: dict[str, int] = {}
    nested: dict[str, int] = {}
    keeps: dict[str, int] = {}
    for n in nodes:
        if not n.attrs or n.kind is not NodeKind.OP:
            continue
        for name, text in n.attrs:
            if name == TEMPORARIES_ATTR:
                temporaries[n.id] = int(text)
            elif name == NESTED_GRADS_ATTR:
                nested[n.id] = int(text)
            elif name == REENTRANT_KEEPS_ATTR:
                keeps[n.id] = int(text)
    return temporaries, nested, keeps
