"""What `torch.utils.checkpoint` keeps: the packs of its non-reentrant frames and a reentrant block's inputs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from .saved import raw_saved_tensors

__all__ = ["Pack", "checkpoint_packs", "checkpoint_inputs"]

Pack = tuple[int, int, tuple[int, ...], torch.dtype, tuple[tuple[tuple[int, ...], torch.dtype], ...]]


def checkpoint_packs(fn: Any) -> dict[str, Pack]:
    """Saved name -> (block, pack index, shape, dtype, block inputs) for each of the node's saved tensors
    that non-reentrant `torch.utils.checkpoint` packed, read from the checkpoint's frame without unpacking.

    `block` is the frame's id (one per checkpointed call); the shape and dtype are those the frame
    recorded when the tensor was saved (`x_metadatas`, in pack order); the block's inputs as (shape,
    dtype) pairs, in order (the recompute re-saves an input without copying it). Names as `saved_values` gives
    them (`name`, `name[i]` for a list, `saved_tensors[i]` for a custom Function). A value packed by
    another hook, or a frame that recorded no metadata (`determinism_check="none"`), is left out.
    """
    out: dict[str, Pack] = {}
    for name, raw in raw_saved_tensors(fn):
        found_pack = _checkpoint_pack(raw)
        if found_pack is not None:
            out[name] = found_pack
    return out


def checkpoint_inputs(fn: Any) -> tuple[int, tuple[torch.Tensor, ...]] | None:
    """(block, the tensors it keeps as its inputs) for the first of the node's saved tensors that non-reentrant
    `torch.utils.checkpoint` packed (the checkpoint keeps its inputs until the block's backward is done);
    None when it packed none."""
    for _, raw in raw_saved_tensors(fn):
        frame = _checkpoint_frame(raw)
        if frame is not None:
            try:
                args = frame.get_inputs()
            except (AttributeError, RuntimeError, TypeError):
                return None
            return (id(frame), tuple(a for a in args if isinstance(a, torch.Tensor)))
    return None


def _checkpoint_frame(raw: Any) -> Any:
    hook = getattr(raw, "unpack_hook", None)
    if hook is None:
        return None
    frame = _closure_value(hook, "frame")
    return frame if frame is not None and hasattr(frame, "weak_holders") else None


def _checkpoint_pack(raw: Any) -> Pack | None:
    frame = _checkpoint_frame(raw)
    if frame is None:
        return None
    try:
        holder = raw.data
    except RuntimeError:
        return None
    metas = getattr(frame, "x_metadatas", None) or []
    for i, ref in enumerate(frame.weak_holders):
        if ref() is holder:
            if i >= len(metas) or not isinstance(metas[i], Mapping):
                return None
            meta = metas[i]
            return (id(frame), i, tuple(int(d) for d in meta["shape"]), meta["dtype"], _frame_inputs(frame))
    return None


def _frame_inputs(frame: Any) -> tuple[tuple[tuple[int, ...], torch.dtype], ...]:
    try:
        args = frame.get_inputs()
    except (AttributeError, RuntimeError, TypeError):
        return ()
    return tuple((tuple(a.shape), a.dtype) for a in args if isinstance(a, torch.Tensor))


def _closure_value(function: Any, name: str) -> Any:
    """The value of free variable `name` in `function`'s closure (following one wrapper closure), or None."""
    seen = 0
    while function is not None and seen < 3:
        code = getattr(function, "__code__", None)
        cells = getattr(function, "__closure__", None) or ()
        if code is None:
            return None
        free = dict(zip(code.co_freevars, cells, strict=False))
        if name in free:
            return free[name].cell_contents
        inner = free.get("unpack_hook")
        function = inner.cell_contents if inner is not None else None
        seen += 1
    return None
