"""What a backward node allocates for each input's gradient: a new tensor, the incoming gradient, or a view of it."""

from __future__ import annotations

from enum import Enum

__all__ = ["Makes", "makes", "VIEWS", "SAME_WHEN_SAME_SIZE", "SAME_FIRST"]


class Makes(Enum):
    """How a backward node makes the gradient it sends to one input."""

    NEW = "new"  # a new tensor the size of the input (most formulas: grad * other, mm, ...)
    SAME = "same"  # the incoming gradient tensor itself (add, clone, an identity cast)
    VIEW = "view"  # a view of the incoming gradient's storage (view, transpose, sum's expand, cat's narrow)


# Every input's gradient is a view of the incoming one: no new memory.
VIEWS = frozenset({
    "ViewBackward0", "UnsafeViewBackward0", "ReshapeAliasBackward0", "AliasBackward0", "TBackward0",
    "TransposeBackward0", "TransposeBackward1", "PermuteBackward0", "SqueezeBackward0", "SqueezeBackward1",
    "SqueezeBackward2", "SqueezeBackward3", "SqueezeBackward4", "UnsqueezeBackward0", "UnsqueezeBackward1",
    "SumBackward0", "SumBackward1", "CatBackward0", "StackBackward0", "ViewAsRealBackward0",
    "ViewAsComplexBackward0", "UnflattenBackward0",
})
# The incoming gradient passes through unchanged when the input has the output's size
# (torch sums a broadcast input's gradient down to its shape: a new tensor).
SAME_WHEN_SAME_SIZE = frozenset({
    "AddBackward0", "AddBackward1", "CloneBackward0", "ToCopyBackward0", "ExpandBackward0",
    "PosBackward0", "LiftFreshBackward0",
})
# Only the first input's gradient passes through: self - other sends -grad to other.
SAME_FIRST = frozenset({"SubBackward0", "SubBackward1"})


def makes(name: str, slot: int, input_bytes: int, output_bytes: int) -> Makes:
    """How backward node `name` makes the gradient for its input at `slot`.

    `input_bytes` is the size of that input (the gradient to make), `output_bytes`
    the size of the node's own forward output (the gradient it receives).

    >>> makes("TBackward0", 0, 64, 64), makes("AddBackward0", 1, 64, 64), makes("AddBackward0", 1, 8, 64)
    (<Makes.VIEW: 'view'>, <Makes.SAME: 'same'>, <Makes.NEW: 'new'>)
    """
    if name in VIEWS:
        return Makes.VIEW
    same_size = input_bytes == output_bytes
    if name in SAME_WHEN_SAME_SIZE and same_size:
        return Makes.SAME
    if name in SAME_FIRST and slot == 0 and same_size:
        return Makes.SAME
    return Makes.NEW
