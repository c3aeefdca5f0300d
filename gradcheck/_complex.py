"""Complex inputs and outputs checked as their real views, as torch's gradcheck does.

A complex tensor z = x + iy of shape S is checked as the real tensor (x, y) of shape
S + (2,) (`torch.view_as_real`), and a complex output w as its real view, that is two
real outputs Re w and Im w. For a real loss L, autograd's gradient of z is
dL/dx + i dL/dy (twice the conjugate Wirtinger derivative dL/dz*), which is exactly
the row of the real Jacobian, so comparing real views compares torch's convention.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

__all__ = ["complex_inputs", "real_args", "with_complex_inputs", "real_values", "complex_notes"]


def complex_inputs(args: Sequence[Any]) -> tuple[int, ...]:
    """Indices of the complex tensors among the inputs."""
    return tuple(i for i, x in enumerate(args) if isinstance(x, torch.Tensor) and x.is_complex())


def real_args(args: Sequence[Any], indices: Sequence[int]) -> tuple[Any, ...]:
    """The inputs with the complex ones at `indices` replaced by their real views (copies).

    A complex input that requires grad gives a real view that requires grad.
    """
    out = list(args)
    for i in indices:
        z = args[i]
        out[i] = torch.view_as_real(z.detach().resolve_conj()).clone().requires_grad_(z.requires_grad)
    return tuple(out)


def with_complex_inputs(fn: Callable[..., Any], indices: Sequence[int]) -> Callable[..., Any]:
    """`fn` taking real views in place of the complex inputs at `indices`."""
    if not indices:
        return fn
    chosen = tuple(indices)

    def on_real_views(*xs: Any) -> Any:
        call = list(xs)
        for i in chosen:
            call[i] = torch.view_as_complex(call[i])
        return fn(*call)

    return on_real_views


def real_values(value: Any) -> Any:
    """`value` with every complex tensor in it (nested tuples and lists) as its real view."""
    if isinstance(value, torch.Tensor):
        return torch.view_as_real(value.resolve_conj()) if value.is_complex() else value
    if isinstance(value, tuple):
        return tuple(real_values(v) for v in value)
    if isinstance(value, list) and any(isinstance(v, (torch.Tensor, tuple, list)) for v in value):
        return [real_values(v) for v in value]
    return value


def complex_notes(args: Sequence[Any], inputs: Sequence[int], outputs: Sequence[int]) -> list[str]:
    """Sentences saying which inputs and outputs are complex and how they were checked."""
    notes = []
    if inputs:
        which = ", ".join(f"input {i} ({str(args[i].dtype).removeprefix('torch.')})" for i in inputs)
        notes.append(
            f"complex: {which} checked as real views (shape + (2,): [..., 0] the real part, "
            "[..., 1] the imaginary part), as torch's gradcheck does; autograd's gradient of a "
            "real loss L is dL/dre + i dL/dim (twice the conjugate Wirtinger derivative dL/dz*), "
            "and a hand gradient is read the same way."
        )
    if outputs:
        which = ", ".join(f"output {o}" for o in outputs)
        notes.append(
            f"complex: {which} checked as two real outputs, the real and the imaginary part "
            "(its real view, shape + (2,))."
        )
    return notes
