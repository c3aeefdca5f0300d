"""What a backward node saved, its type and its forward output's metadata, read from torch's private attributes."""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["FREED", "MODIFIED", "PACKED", "SavedValue", "is_custom_function", "NodeType", "node_type", "saved_values",
           "gradient_metadata",
           "output_sizes", "output_metadata", "raw_saved_tensors"]

_SAVED_PREFIX = "_saved_"
_RAW_PREFIX = "_raw_saved_"  # a saved tensor also shows under this name

# Marks a saved tensor that backward() has already released.
FREED = object()
# Marks a saved tensor modified in place after it was saved (torch refuses to unpack it).
MODIFIED = object()
# Marks a saved tensor that a saved_tensors_hooks pair packed (torch.utils.checkpoint keeps
# no tensor and recomputes it in backward): unpacking it would run the hook, so it is not.
PACKED = object()

SavedValue = tuple[str, Any]

# What to read from a node is a property of its generated class: the
# `_saved_*` property names (with the prefix dropped) or, for a custom
# Function, None (its tensors come from `saved_tensors`). Looked up once per
# type rather than with dir() and isinstance() on every node.
_spec_by_type: dict[type, tuple[tuple[str, str], ...] | None] = {}
_UNKNOWN: Any = object()  # not a spec: `is` tells it from every real one


def _spec(cls: type) -> tuple[tuple[str, str], ...] | None:
    if issubclass(cls, torch.autograd.function.BackwardCFunction):
        spec = None
    else:
        cut = len(_SAVED_PREFIX)
        spec = tuple((a, a[cut:]) for a in dir(cls) if a.startswith(_SAVED_PREFIX))
    _spec_by_type[cls] = spec
    return spec


def is_custom_function(fn: Any) -> bool:
    """Whether `fn` is the backward node of a Python `torch.autograd.Function`."""
    cls = type(fn)
    return (_spec_by_type[cls] if cls in _spec_by_type else _spec(cls)) is None


# What a walker needs to know of a node's class before touching the node:
# its name (torchviz's type(fn).__name__; fn.name() spells some C++ nodes
# "torch::autograd::CopySlices"), how many values `saved_values` reads (most
# chain ops save one scalar or nothing; 1 for a custom Function, whose count
# is known only per node), whether it is a custom Function, whether it can
# hold a leaf's `variable` (AccumulateGrad, or a custom Function whose ctx has
# one: getattr(fn, "variable", None) on any other node raises and swallows an
# AttributeError, which costs more than the rest of discovering it), and
# `scalars` (below).
NodeType = tuple[str, int, bool, bool, Callable[[Any], Any] | None]


def node_type(cls: type) -> NodeType:
    """(name, values saved, is a custom Function, may hold `variable`, scalars) of a node class.

    `scalars`, for a class that saves no tensor, reads its raw saved values in
    one C call, in `saved_values` order: the value itself when it saves one,
    else a tuple. torch keeps a saved tensor as a SavedVariable, which also
    shows as `_raw_saved_<name>`; a class with none saves plain values only
    (alpha, dim, sizes), so one call can read them all. The values are raw:
    `saved_values` is the reading that fixes int64 signs and freed tensors.
    """
    spec = _spec_by_type[cls] if cls in _spec_by_type else _spec(cls)
    custom = spec is None
    scalars = None
    if spec and not any(a.startswith(_RAW_PREFIX) for a in dir(cls)):
        scalars = operator.attrgetter(*(attr for attr, _ in spec))
    saves = 1 if spec is None else len(spec)
    return cls.__name__, saves, custom, custom or hasattr(cls, "variable"), scalars


def saved_values(fn: Any) -> list[SavedValue]:
    """What a backward node saved for backward, as (name, value) pairs.

    Values are tensors, None, plain Python values, tuples of those, FREED when
    backward() already released them, or, for a tensor a saved-tensor hook packed,
    what the hook kept (read without running its unpack: an identity hook's tensor,
    `save_on_cpu`'s copy) or PACKED when it kept no tensor (checkpointing). Names drop the `_saved_`
    prefix; a custom Function's `ctx.save_for_backward` tensors are named
    `saved_tensors[i]`.
    """
    cls = type(fn)
    spec = _spec_by_type.get(cls, _UNKNOWN)
    if spec is _UNKNOWN:
        spec = _spec(cls)
    if spec is None:
        raws = _raw(fn, "_raw_saved_tensors")
        if _hooked(raws):
            return [(f"saved_tensors[{i}]", _held_by_hook(r)) for i, r in enumerate(raws)]
        try:
            tensors = fn.saved_tensors
        except RuntimeError as e:
            return [("saved_tensors", _unreadable(e))]
        return [(f"saved_tensors[{i}]", t) for i, t in enumerate(tensors)]
    getter = _raw_getters.get(cls, _UNKNOWN)
    if getter is _UNKNOWN:
        getter = _raw_getter(cls, spec)
    packed = _packed_names(fn, getter) if getter is not None else None
    out: list[SavedValue] = []
    for attr, name in spec:
        if packed is not None and name in packed:
            out.append((name, packed[name]))
            continue
        try:
            value = getattr(fn, attr)
        except RuntimeError as e:  # freed by backward(), or modified in place since
            value = _unreadable(e)
        kind = type(value)
        if (kind is int and value >= _INT64_SIGN) or kind is tuple:  # all _signed can change
            value = _signed(value)
        out.append((name, value))
    return out


# Node class -> one call reading the raw SavedVariables of its saved tensors (None: it saves none).
_raw_getters: dict[type, Any] = {}
_SAVED_TENSOR = torch._C._autograd.SavedTensor


def _raw_getter(cls: type, spec: tuple[tuple[str, str], ...]) -> Any:
    names = tuple(_RAW_PREFIX + name for _, name in spec if hasattr(cls, _RAW_PREFIX + name))
    getter = _raw_getters[cls] = (operator.attrgetter(*names), names) if names else None
    return getter


def _packed_names(fn: Any, getter: tuple[Any, tuple[str, ...]]) -> dict[str, Any] | None:
    """Saved name -> PACKED (or a tuple of them, for a list) for the node's values a saved-tensor hook packed.

    Reading the raw SavedVariables runs no hook; None when no value is packed (the usual case).
    """
    read, names = getter
    try:
        raws = read(fn)
    except RuntimeError:  # freed by backward(): the plain reading says so
        return None
    if len(names) == 1:
        if type(raws) is _SAVED_TENSOR and raws.unpack_hook is None:  # type: ignore[attr-defined]
            return None  # the usual case, first
        raws = (raws,)
    else:
        for raw in raws:
            if type(raw) is not _SAVED_TENSOR or raw.unpack_hook is not None:  # type: ignore[attr-defined]
                break
        else:
            return None
    found = None
    for raw_name, raw in zip(names, raws, strict=True):
        if type(raw) is _SAVED_TENSOR:
            if raw.unpack_hook is None:  # type: ignore[attr-defined]
                continue
            value: Any = _held_by_hook(raw)
        elif raw is None or not _hooked(raw):
            continue
        else:
            value = tuple(_held_by_hook(r) for r in raw)
        if found is None:
            found = {}
        found[raw_name[len(_RAW_PREFIX):]] = value
    return found


def _raw(fn: Any, attr: str) -> Any:
    try:
        return getattr(fn, attr, None)
    except RuntimeError:  # freed by backward(): the plain reading says so
        return None


def _held_by_hook(raw: Any) -> Any:
    """What a saved-tensor hook's pack function kept, read without unpacking: the tensor it holds
    (an identity hook's own tensor, `save_on_cpu`'s copy), else PACKED (checkpointing keeps none)."""
    if getattr(raw, "unpack_hook", None) is None:
        return raw.data
    kept = raw.data
    if isinstance(kept, torch.Tensor):
        return kept
    if isinstance(kept, (tuple, list)):
        return next((t for t in kept if isinstance(t, torch.Tensor)), PACKED)
    return PACKED


def _hooked(raw: Any) -> tuple[bool, ...]:
    """(True,) for a SavedVariable packed by a saved-tensor hook, one flag per item of a list of them; () if none."""
    if raw is None:
        return ()
    items = raw if isinstance(raw, (list, tuple)) else (raw,)
    flags = tuple(getattr(r, "unpack_hook", None) is not None for r in items)
    return flags if any(flags) else ()


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


def output_sizes(fn: Any) -> tuple[int, ...] | None:
    """The bytes of each forward output `fn` differentiates, by output number (None when unknown)."""
    try:
        meta = fn._input_metadata
        return tuple(_numel(m.shape) * m.dtype.itemsize for m in meta)
    except (AttributeError, TypeError, RuntimeError):  # nested tensors have no plain shape
        return None


def _numel(shape: Any) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n


def gradient_metadata(fn: Any) -> tuple[tuple[tuple[int, ...], torch.dtype], ...] | None:
    """(shape, dtype) of each gradient the engine gives `fn`, by output number (None: nested tensors, or
    unknown)."""
    try:
        return tuple((tuple(m.shape), m.dtype) for m in fn._input_metadata)
    except (AttributeError, TypeError, RuntimeError):  # nested tensors have no plain shape
        return None


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


def raw_saved_tensors(fn: Any) -> list[tuple[str, Any]]:
    """(name, raw SavedVariable) of each of a node's saved tensors, named as `saved_values` names them."""
    cls = type(fn)
    spec = _spec_by_type.get(cls, _UNKNOWN)
    if spec is _UNKNOWN:
        spec = _spec(cls)
    raws: list[tuple[str, Any]] = []
    if spec is None:
        found = _raw(fn, "_raw_saved_tensors")
        raws = [(f"saved_tensors[{i}]", r) for i, r in enumerate(found or ())]
    else:
        for _, name in spec:
            raw = _raw(fn, _RAW_PREFIX + name)
            if isinstance(raw, (list, tuple)):
                raws.extend((f"{name}[{i}]", r) for i, r in enumerate(raw))
            elif raw is not None:
                raws.append((name, raw))
    return raws

