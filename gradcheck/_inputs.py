"""Validating inputs and outputs, and making the copies each side of the check runs on."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from gradcheck.errors import InputError
from gradcheck.report import TensorSummary

__all__ = [
    "as_tuple",
    "differentiated_indices",
    "autograd_copies",
    "numerical_copies",
    "call_outputs",
    "checked_outputs",
    "summarize",
    "shape_text",
]


def shape_text(shape: Sequence[int]) -> str:
    """A shape as people write it: (3,), (2, 4), () for a scalar."""
    shape = tuple(shape)
    return f"({shape[0]},)" if len(shape) == 1 else "(" + ", ".join(map(str, shape)) + ")"


def as_tuple(inputs: Any) -> tuple[Any, ...]:
    """The inputs as a tuple: a lone tensor becomes a 1-tuple.

    Raises:
        InputError: when `inputs` is neither a tensor nor a tuple/list.
    """
    if isinstance(inputs, torch.Tensor):
        return (inputs,)
    if isinstance(inputs, (tuple, list)):
        if not inputs:
            raise InputError("inputs is empty: pass the tensor(s) to differentiate at")
        return tuple(inputs)
    raise InputError(
        f"inputs must be a tensor or a tuple of tensors, but got {type(inputs).__name__}. "
        "Wrap a single tensor as (x,) or pass it alone."
    )


def differentiated_indices(args: Sequence[Any]) -> tuple[int, ...]:
    """Which inputs to differentiate: those requiring grad, else every floating tensor.

    Raises:
        InputError: when no input can be differentiated, or one is complex.
    """
    tensors = [(i, x) for i, x in enumerate(args) if isinstance(x, torch.Tensor)]
    for i, x in tensors:
        if x.is_complex() and x.requires_grad:
            raise InputError(
                f"input {i} is complex ({x.dtype}); this checker handles real floating "
                "tensors only. Check the real and imaginary parts as two real inputs."
            )
    chosen = tuple(i for i, x in tensors if x.requires_grad)
    if not chosen:
        chosen = tuple(i for i, x in tensors if x.is_floating_point())
    if not chosen:
        found = ", ".join(
            f"input {i}: {x.dtype if isinstance(x, torch.Tensor) else type(x).__name__}"
            for i, x in enumerate(args)
        )
        raise InputError(
            f"no input can be differentiated: expected at least one floating-point tensor, "
            f"found {found}. Make x with a float dtype, e.g. torch.tensor([0., 1., 2.])."
        )
    return chosen


def autograd_copies(
    args: Sequence[Any], diff: Sequence[int], device: torch.device
) -> tuple[Any, ...]:
    """Fresh leaf tensors in the inputs' own dtype; the differentiated ones require grad.

    Clones, so neither the user's tensors nor their `.grad` are touched.
    """
    out: list[Any] = []
    for i, x in enumerate(args):
        if isinstance(x, torch.Tensor):
            x = x.detach().to(device).clone()
            x.requires_grad_(i in diff)
        out.append(x)
    return tuple(out)


def numerical_copies(
    args: Sequence[Any], device: torch.device, dtype: torch.dtype | None
) -> tuple[Any, ...]:
    """Detached copies for the finite differences, floating ones cast to `dtype`.

    `dtype=None` keeps each input's own dtype.
    """
    out: list[Any] = []
    for x in args:
        if isinstance(x, torch.Tensor):
            cast = dtype if (dtype is not None and x.is_floating_point()) else x.dtype
            x = x.detach().to(device=device, dtype=cast).clone()
        out.append(x)
    return tuple(out)


def call_outputs(fn: Callable[..., Any], args: Sequence[Any]) -> tuple[torch.Tensor, ...]:
    """Calls `fn(*args)` and returns its outputs as a tuple of tensors.

    Raises:
        InputError: when `fn` returns something other than a tensor or a tuple of them.
    """
    result = fn(*args)
    if isinstance(result, torch.Tensor):
        return (result,)
    if isinstance(result, (tuple, list)) and result:
        bad = [
            (k, type(r).__name__) for k, r in enumerate(result) if not isinstance(r, torch.Tensor)
        ]
        if not bad:
            return tuple(result)
        k, name = bad[0]
        raise InputError(
            f"fn must return a tensor or a tuple of tensors, but its output {k} is a {name}. "
            "Return only tensors (drop the others, or wrap numbers with torch.tensor)."
        )
    raise InputError(
        f"fn must return a tensor or a tuple of tensors, but it returned "
        f"{type(result).__name__}. Return the tensor whose gradient you want checked."
    )


def checked_outputs(outputs: Sequence[torch.Tensor]) -> tuple[int, ...]:
    """Indices of the outputs to differentiate: the floating-point ones.

    Raises:
        InputError: when no output is a floating-point tensor.
    """
    chosen = tuple(k for k, y in enumerate(outputs) if y.is_floating_point())
    if not chosen:
        dtypes = ", ".join(str(y.dtype) for y in outputs)
        raise InputError(
            f"fn returned no floating-point output (found {dtypes}); integer and boolean "
            "outputs have no gradient. Return the floating-point result before rounding."
        )
    return chosen


def summarize(tensors: Sequence[Any], chosen: Sequence[int]) -> tuple[TensorSummary, ...]:
    """Plain summaries of the tensors among `tensors` (non-tensors are left out)."""
    return tuple(
        TensorSummary(
            index=k,
            shape=tuple(t.shape),
            dtype=str(t.dtype).removeprefix("torch."),
            device=str(t.device),
            differentiated=k in chosen,
        )
        for k, t in enumerate(tensors)
        if isinstance(t, torch.Tensor)
    )
