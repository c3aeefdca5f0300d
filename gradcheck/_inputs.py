"""Validating inputs and outputs, and making the copies each side of the check runs on."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from gradcheck.errors import InputError
from gradcheck.report import TensorSummary

__all__ = [
    "as_tuple",
    "refuse_unusable",
    "differentiated_indices",
    "same_layout_copy",
    "overlapping",
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
        if all(_is_numbers(v) for v in inputs):
            raise InputError(
                f"inputs is a {type(inputs).__name__} of numbers, not a tensor: make it one, e.g. "
                f"torch.tensor({_preview(inputs)}, dtype=torch.float64, requires_grad=True)"
            )
        return tuple(inputs)
    raise InputError(
        f"inputs must be a tensor or a tuple of tensors, but got {type(inputs).__name__}. "
        "Wrap a single tensor as (x,) or pass it alone."
    )


def _is_numbers(value: Any) -> bool:
    if isinstance(value, (list, tuple)):
        return all(_is_numbers(v) for v in value)
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _preview(values: Any) -> str:
    text = repr(list(values) if isinstance(values, tuple) else values)
    return text if len(text) <= 40 else text[:36] + "...]"


def refuse_unusable(args: Sequence[Any]) -> None:
    """Refuses tensors the checker cannot differentiate at: sparse, meta, and lists of numbers.

    Raises:
        InputError: naming the input, what it is, and what to pass instead.
    """
    for i, x in enumerate(args):
        if isinstance(x, torch.Tensor):
            if x.layout != torch.strided:
                raise InputError(
                    f"input {i} is a sparse tensor (layout {x.layout}); the checker perturbs and "
                    "differentiates dense tensors only. Pass input.to_dense(), and convert it back "
                    "inside fn (to_sparse()) if fn needs a sparse one."
                )
            if x.device.type == "meta":
                raise InputError(
                    f"input {i} is on the meta device: it has a shape {shape_text(x.shape)} but no "
                    "values, so there is no point to differentiate at. Make it on cpu or cuda "
                    "(e.g. torch.randn(shape, dtype=torch.float64))."
                )
        elif isinstance(x, (list, tuple)) and x and _is_numbers(x):
            raise InputError(
                f"input {i} is a {type(x).__name__} of numbers, not a tensor: make it one, e.g. "
                f"torch.tensor({_preview(x)}, dtype=torch.float64, requires_grad=True)"
            )


def differentiated_indices(args: Sequence[Any]) -> tuple[int, ...]:
    """Which inputs to differentiate: those requiring grad, else every floating tensor.

    Complex inputs are seen here as their real views, which are floating.

    Raises:
        InputError: when no input can be differentiated.
    """
    tensors = [(i, x) for i, x in enumerate(args) if isinstance(x, torch.Tensor)]
    chosen = tuple(i for i, x in tensors if x.requires_grad)
    if not chosen:
        chosen = tuple(i for i, x in tensors if x.is_floating_point())
    if not chosen:
        found = ", ".join(
            f"input {i}: {x.dtype}" if isinstance(x, torch.Tensor) else f"input {i}: a {type(x).__name__}, not a tensor"
            for i, x in enumerate(args)
        )
        raise InputError(
            f"no input can be differentiated: expected at least one floating-point or complex tensor, "
            f"found {found}. Make the inputs to differentiate float tensors, e.g. "
            "torch.tensor([0.0, 1.0, 2.0]) or tensor.double()."
        )
    return chosen


def autograd_copies(args: Sequence[Any], diff: Sequence[int], device: torch.device) -> tuple[Any, ...]:
    """Fresh leaf tensors in the inputs' own dtype and layout; the differentiated ones require grad.

    Copies, so neither the user's tensors nor their `.grad` are touched; each keeps
    its strides and storage offset (a slice x[:, ::2], an expanded tensor), so a
    backward that is wrong only for such layouts is checked as the user calls it.
    """
    out: list[Any] = []
    for i, x in enumerate(args):
        if isinstance(x, torch.Tensor):
            x = same_layout_copy(x.detach(), device)
            x.requires_grad_(i in diff)
        out.append(x)
    return tuple(out)


_OFFSET_SLACK = 4096  # storage elements before a view kept in the copy, at most this many beyond its extent


def same_layout_copy(x: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A copy of `x` on `device` with x's sizes, strides and (when cheap) storage offset."""
    if (x.is_contiguous() and x.storage_offset() == 0) or x.numel() == 0:
        return x.to(device).clone()
    extent = 1 + sum((size - 1) * stride for size, stride in zip(x.shape, x.stride(), strict=True))
    offset = x.storage_offset()
    keep = offset if offset <= 4 * extent + _OFFSET_SLACK else 0
    region = torch.as_strided(x, (extent,), (1,), offset).to(device)
    storage = torch.empty(keep + extent, dtype=x.dtype, device=device)
    storage[keep:] = region
    return storage.as_strided(x.shape, x.stride(), keep)


def overlapping(x: torch.Tensor) -> bool:
    """Whether some elements of x share one memory location (an expanded tensor)."""
    return any(stride == 0 and size > 1 for size, stride in zip(x.shape, x.stride(), strict=True))


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


def call_outputs(
    fn: Callable[..., Any], args: Sequence[Any], *, found_complex: list[int] | None = None
) -> tuple[torch.Tensor, ...]:
    """Calls `fn(*args)` and returns its outputs as a tuple of tensors, complex ones as real views.

    Args:
        found_complex: when given, the indices of complex outputs are appended to it.

    Raises:
        InputError: when `fn` returns something other than a tensor or a tuple of them.
    """
    result = fn(*args)
    if isinstance(result, torch.Tensor):
        result = (result,)
    elif not (isinstance(result, (tuple, list)) and result):
        raise InputError(
            f"fn must return a tensor or a tuple of tensors, but it returned "
            f"{type(result).__name__}. Return the tensor whose gradient you want checked."
        )
    for k, r in enumerate(result):
        if not isinstance(r, torch.Tensor):
            raise InputError(
                f"fn must return a tensor or a tuple of tensors, but its output {k} is a "
                f"{type(r).__name__}. Return only tensors (drop the others, or wrap numbers with torch.tensor)."
            )
    if not any(r.is_complex() for r in result):
        return tuple(result)
    if found_complex is not None:
        found_complex.extend(k for k, r in enumerate(result) if r.is_complex())
    return tuple(torch.view_as_real(r.resolve_conj()) if r.is_complex() else r for r in result)


def checked_outputs(outputs: Sequence[torch.Tensor]) -> tuple[int, ...]:
    """Indices of the outputs to differentiate: the floating-point ones.

    Raises:
        InputError: when no output is a floating-point tensor.
    """
    chosen = tuple(k for k, y in enumerate(outputs) if y.is_floating_point())
    if not chosen:
        dtypes = ", ".join(str(y.dtype) for y in outputs)
        kinds = sorted({"boolean" if y.dtype == torch.bool else "integer" for y in outputs})
        raise InputError(
            f"fn returned no floating-point or complex output (found {dtypes}); {' and '.join(kinds)} "
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
