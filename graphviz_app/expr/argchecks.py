"""Arguments torch would fail on obscurely, refused first with a message saying what to do.

Torch answers some calls with its own internals: a build path (`F.pad` whose
padding overflows), "ZeroDivisionError" (`take_along_dim` on an empty
dimension) or an empty heading (`unflatten` with two -1 sizes). These are
looked at before the call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from .guards import Refused

__all__ = ["check_arguments"]

def check_arguments(name: str, what: str, values: Sequence[Any], kwargs: dict[str, Any]) -> None:
    """Refuse the calls of `name` that torch would fail on without a useful message.

    `values` are the positional arguments, the tensor itself first for methods.
    """
    check = _CHECKS.get(name)
    if check is not None:
        check(what, values, kwargs)


def _arg(values: Sequence[Any], kwargs: dict[str, Any], index: int, key: str, default: Any = None) -> Any:
    return values[index] if len(values) > index else kwargs.get(key, default)


def _shape(t: torch.Tensor) -> str:
    dims = tuple(t.shape)
    return f"({dims[0]},)" if len(dims) == 1 else "(" + ", ".join(map(str, dims)) + ")"


def _pad(what: str, values: Sequence[Any], kwargs: dict[str, Any]) -> None:
    x, pad = _arg(values, kwargs, 0, "input"), _arg(values, kwargs, 1, "pad")
    if not isinstance(x, torch.Tensor) or not isinstance(pad, (list, tuple)):
        return
    if not all(type(p) is int for p in pad) or len(pad) % 2 or len(pad) > 2 * x.dim():
        return  # torch says what it expects
    for i in range(0, len(pad), 2):
        dim = x.dim() - 1 - i // 2
        size, before, after = x.shape[dim], pad[i], pad[i + 1]
        removed = -min(before, 0) - min(after, 0)
        if removed > size:  # exact: Python integers do not overflow as torch's sums do
            raise Refused(
                f"{what} removes {removed:,} elements from dimension {dim} of the input, which has {size:,} "
                f"(padding {before:,} before and {after:,} after): a negative padding removes elements, at most "
                "as many as the dimension has", kind="shape")


def _take_along_dim(what: str, values: Sequence[Any], kwargs: dict[str, Any]) -> None:
    x, indices = _arg(values, kwargs, 0, "input"), _arg(values, kwargs, 1, "indices")
    dim = _arg(values, kwargs, 2, "dim")
    _check_pick(what, x, indices, dim)


def _gather(what: str, values: Sequence[Any], kwargs: dict[str, Any]) -> None:
    x, dim, indices = _arg(values, kwargs, 0, "input"), _arg(values, kwargs, 1, "dim"), _arg(values, kwargs, 2, "index")
    _check_pick(what, x, indices, dim)


def _check_pick(what: str, x: Any, indices: Any, dim: Any) -> None:
    if not isinstance(x, torch.Tensor) or not isinstance(indices, torch.Tensor) or indices.numel() == 0:
        return
    if dim is None:
        size, where = x.numel(), "the flattened input"
    elif type(dim) is int and -x.dim() <= dim < x.dim() and x.dim() > 0:
        size, where = x.shape[dim], f"dimension {dim} of the input (shape {_shape(x)})"
    else:
        return  # torch says the dimension is out of range
    if size == 0:
        raise Refused(
            f"{what} picks elements along {where}, which has none: there is nothing to pick. Give indices "
            "with size 0 there too, or an input that has elements along it", kind="shape")


def _unflatten(what: str, values: Sequence[Any], kwargs: dict[str, Any]) -> None:
    sizes = _arg(values, kwargs, 2, "sizes")
    if not isinstance(sizes, (list, tuple)):
        return
    if sum(1 for s in sizes if type(s) is int and s == -1) > 1:
        shown = "(" + ", ".join(map(str, sizes)) + ("," if len(sizes) == 1 else "") + ")"
        raise Refused(f"{what} has more than one -1 among the sizes {shown}: -1 means 'work this size out from "
                      "the others', which torch can do for one size only. Give the other sizes, e.g. (2, -1)",
                      kind="shape")


_CHECKS = {
    "pad": _pad,
    "take_along_dim": _take_along_dim,
    "gather": _gather,
    "unflatten": _unflatten,
}
