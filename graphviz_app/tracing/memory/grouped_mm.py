"""Grouped matmuls (mixture-of-experts layers) on meta and fake tensors, where torch's meta function refuses them.

torch's meta function for `aten::_grouped_mm` accepts bfloat16 inputs only, while the CPU
kernel runs float32 too: a forecast of an MoE model in float32 (transformers' Mixtral) would
fail there. Inside `meta_grouped_mm`, that op on meta or fake tensors returns a tensor of the
shape and dtype the kernel returns (torch's documented cases: 2-D x 3-D, 3-D x 2-D, 2-D x 2-D,
3-D x 3-D) without computing it; any call the rules do not cover goes to torch as it is.
"""

from __future__ import annotations

from typing import Any

import torch

from ..torch_internals import TorchDispatchMode, grouped_mm_op

__all__ = ["meta_grouped_mm", "grouped_mm_shape"]

_OP = grouped_mm_op()


def grouped_mm_shape(a: torch.Size, b: torch.Size, groups: int | None) -> tuple[int, ...] | None:
    """The output shape of the grouped matmul of `a` and `b` (`groups`: the length of its offsets), or None.

    >>> grouped_mm_shape(torch.Size([10, 4]), torch.Size([3, 4, 6]), 3)
    (10, 6)
    >>> grouped_mm_shape(torch.Size([4, 10]), torch.Size([10, 6]), 3)
    (3, 4, 6)
    """
    if len(a) == 2 and len(b) == 3:
        return (a[0], b[-1])
    if len(a) == 3 and len(b) == 2:
        return (a[1], b[-1])
    if len(a) == 2 and len(b) == 2 and groups is not None:
        return (groups, a[0], b[-1])
    if len(a) == 3 and len(b) == 3:
        return (a[0], a[1], b[-1])
    return None


def _is_shape_only(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and (t.device.type == "meta" or type(t).__name__ == "FakeTensor")


class meta_grouped_mm(TorchDispatchMode):  # noqa: N801 - used as a context, like torch.no_grad
    """Inside the block, `aten::_grouped_mm` on meta or fake tensors returns an empty tensor of its output's shape."""

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func is _OP and _OP is not None and len(args) >= 2 and all(map(_is_shape_only, args[:2])):
            a, b = args[0], args[1]
            offs = args[2] if len(args) > 2 else kwargs.get("offs")
            shape = grouped_mm_shape(a.shape, b.shape, offs.shape[0] if isinstance(offs, torch.Tensor) else None)
            dtype = kwargs.get("out_dtype") or (args[4] if len(args) > 4 and args[4] is not None else a.dtype)
            if shape is not None:
                return torch.empty(shape, dtype=dtype, device=a.device)
        return func(*args, **kwargs)
