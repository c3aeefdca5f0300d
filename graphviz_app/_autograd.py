"""The one place that reads torch's private autograd internals.

torch exposes what a backward node saved only through generated private
attributes (`_saved_self`, `_saved_dim`, ...) and the forward output's
metadata through `_input_metadata`. When a torch upgrade renames them, this
module is the only one to change.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["SavedValue", "saved_values", "output_metadata", "FREED", "MODIFIED"]

_SAVED_PREFIX = "_saved_"

# Marks a saved tensor that backward() has already released.
FREED = object()
# Marks a saved tensor modified in place after it was saved (torch refuses to unpack it).
MODIFIED = object()

SavedValue = tuple[str, Any]

# Saved-attribute names are properties of the generated node class, so they
# are looked up once per type rather than with dir() on every node.
_names_by_type: dict[type, tuple[str, ...]] = {}


def _saved_names(fn: Any) -> tuple[str, ...]:
    cls = type(fn)
    names = _names_by_type.get(cls)
    if names is None:
        names = tuple(a for a in dir(cls) if a.startswith(_SAVED_PREFIX))
        _names_by_type[cls] = names
    return names


def _is_custom_function(fn: Any) -> bool:
    return isinstance(fn, torch.autograd.function.BackwardCFunction)


def saved_values(fn: Any) -> list[SavedValue]:
    """What a backward node saved for backward, as (name, value) pairs.

    Values are tensors, None, plain Python values, tuples of those, or
    FREED when backward() already released them. Names drop the `_saved_`
    prefix; a custom Function's `ctx.save_for_backward` tensors are named
    `saved_tensors[i]`.
    """
    if _is_custom_function(fn):
        try:
            tensors = fn.saved_tensors
        except RuntimeError as e:
            return [("saved_tensors", _unreadable(e))]
        return [(f"saved_tensors[{i}]", t) for i, t in enumerate(tensors)]
    out: list[SavedValue] = []
    for attr in _saved_names(fn):
        try:
            value = getattr(fn, attr)
        except RuntimeError as e:
            value = _unreadable(e)
        out.append((attr[len(_SAVED_PREFIX):], _signed(value)))
    return out


def _unreadable(error: RuntimeError) -> object:
    # torch says "...has been modified by an inplace operation..." for a saved
    # tensor changed in place, and "Trying to backward through the graph a
    # second time..." for one backward() released.
    return MODIFIED if "modified by an inplace operation" in str(error) else FREED


_INT64_SIGN = 1 << 63


def _signed(value: Any) -> Any:
    # torch returns negative int64 attributes as their uint64 bit pattern:
    # x.sum(-1).grad_fn._saved_dim == (18446744073709551615,); show -1.
    if type(value) is int and value >= _INT64_SIGN:
        return value - (_INT64_SIGN << 1)
    if type(value) is tuple and any(type(v) is int and v >= _INT64_SIGN for v in value):
        return tuple(_signed(v) for v in value)
    return value


def output_metadata(fn: Any) -> tuple[tuple[int, ...], torch.dtype, torch.device] | None:
    """Shape, dtype and device of the first forward output `fn` differentiates."""
    try:
        meta = fn._input_metadata
    except AttributeError:
        return None
    if not meta:
        return None
    first = meta[0]
    try:
        return tuple(first.shape), first.dtype, first.device
    except (TypeError, RuntimeError):  # nested tensors have no plain shape
        return None
