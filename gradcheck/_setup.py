"""Preparing a run: the finite-difference copies and fn's outputs there, and the hand gradient."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch

from gradcheck._autograd import first_line
from gradcheck._cast import cast_function
from gradcheck._complex import real_values, with_complex_inputs
from gradcheck._expected import normalize_expected
from gradcheck._inputs import call_outputs, numerical_copies
from gradcheck._notes import dtype_label
from gradcheck._state import CheckOptions, RunState
from gradcheck.errors import GradcheckError

__all__ = ["numerical_base", "hand_values", "hand_jacobians"]

Pair = tuple[int, int]


def numerical_base(state: RunState) -> list[torch.Tensor]:
    """Makes the finite-difference copies and fn's outputs there, falling back to own dtypes.

    The float tensors and modules fn holds (itself an nn.Module, its closure, the
    globals it names) are cast on copies too, so fn computes in the check's dtype.
    When fn still fails on cast copies (it mixes dtypes deeper down), the finite
    differences run in the inputs' own dtype, with a step and tolerances chosen
    for that dtype unless given, and a note says so.
    """
    dtype = state.opts.dtype
    state.num_args = numerical_copies(state.args, state.device, dtype)
    cast = cast_function(state.user_fn, dtype)
    state.num_fn = with_complex_inputs(cast.fn, state.complex_inputs)
    try:
        outs = call_outputs(state.num_fn, state.num_args)
    except Exception as e:
        own = [x.dtype for x in state.args if isinstance(x, torch.Tensor) and x.is_floating_point()]
        if isinstance(e, GradcheckError) or dtype is None or all(d == dtype for d in own):
            raise
        return _own_dtype_base(state, e)
    note = cast.note(dtype) if dtype is not None else None
    if note:
        state.notes.append(note)
    return [outs[o].detach() for o in state.checked]


def _own_dtype_base(state: RunState, failure: Exception) -> list[torch.Tensor]:
    """Finite differences in the inputs' own dtype, for a fn that mixes dtypes."""
    state.num_args, state.num_fn = numerical_copies(state.args, state.device, None), state.fn
    outs = call_outputs(state.fn, state.num_args)
    base = [outs[o].detach() for o in state.checked]
    computes_in = state.num_args[state.diff[0]].dtype
    wanted = dtype_label([state.opts.dtype]) if state.opts.dtype is not None else "another dtype"
    state.notes.append(
        f"fn computes in {dtype_label([computes_in])}: it failed on {wanted} copies of the "
        f"inputs ({first_line(failure)}), so finite differences ran in the inputs' own dtype. "
        f"{_adapt_to(state, computes_in, base)}For a stricter check, give fn's own tensors "
        "(weights, constants) as inputs, or convert them (module.double())."
    )
    return base


_DEFAULT_STEPS = (CheckOptions().eps, CheckOptions().atol, CheckOptions().rtol)


def _adapt_to(state: RunState, dtype: torch.dtype, base: list[torch.Tensor]) -> str:
    """Chooses eps, atol and rtol for finite differences in `dtype`, unless the user set them."""
    opts = state.opts
    roundoff = torch.finfo(dtype).eps
    x_scale = max(
        (float(state.num_args[i].abs().max()) for i in state.diff if state.num_args[i].numel()),
        default=0.0,
    )
    f_scale = max((float(y.abs().nan_to_num(0.0, 0.0, 0.0).max()) for y in base if y.numel()), default=0.0)
    # Central differences err by about eps^2 |f'''| + roundoff |f| / eps: the cube
    # root of the roundoff balances the two, leaving about roundoff^(2/3) |f|.
    eps = roundoff ** (1 / 3) * max(1.0, x_scale)
    atol = max(opts.atol, 50 * roundoff ** (2 / 3) * max(1.0, f_scale))
    rtol = max(opts.rtol, 100 * roundoff ** (2 / 3))
    if (opts.eps, opts.atol, opts.rtol) != _DEFAULT_STEPS:
        return (
            f"You set eps/atol/rtol; for {dtype_label([dtype])} about eps={eps:.2g}, "
            f"atol={atol:.2g}, rtol={rtol:.2g} suit. "
        )
    state.opts = replace(opts, eps=eps, atol=atol, rtol=rtol)
    return (
        f"The step and tolerances were chosen for {dtype_label([dtype])}: eps={eps:.2g}, "
        f"atol={atol:.2g}, rtol={rtol:.2g} (pass eps, atol, rtol to set them). "
    )


def hand_values(
    state: RunState,
    expected: Any,
    *,
    outputs: tuple[int, ...],
    n_outputs: int,
    shapes: dict[Pair, tuple[tuple[int, ...], tuple[int, ...]]],
) -> dict[Pair, torch.Tensor]:
    """The hand derivation `expected` as one float64 Jacobian per (output, input) pair.

    A callable gets the inputs in the dtype finite differences ran in (complex ones
    as complex tensors) and, like fn, copies of its own float tensors in that dtype;
    complex values it returns or that are given are read as their real views.
    """
    if expected is None:
        return {}
    value = expected
    if callable(expected):
        num_dtype = state.num_args[state.diff[0]].dtype
        hand = with_complex_inputs(cast_function(expected, num_dtype).fn, state.complex_inputs)
        value = hand(*[x.clone() if isinstance(x, torch.Tensor) else x for x in state.num_args])
        if state.expected_dtype is None:
            state.expected_dtype = dtype_label(state.num_args[i].dtype for i in state.diff)
    elif state.expected_dtype is None:
        state.expected_dtype = "as given"
    return normalize_expected(
        real_values(value),
        outputs=outputs,
        inputs=state.diff,
        n_outputs=n_outputs,
        n_inputs=len(state.args),
        shapes=shapes,
        device=state.device,
    )


def hand_jacobians(state: RunState, expected: Any) -> dict[Pair, torch.Tensor]:
    """`expected` as one float64 Jacobian per (checked output, differentiated input) pair."""
    shapes = {
        (o, i): (tuple(state.outputs[o].shape), tuple(state.args[i].shape)) for o in state.checked for i in state.diff
    }
    return hand_values(state, expected, outputs=state.checked, n_outputs=len(state.outputs), shapes=shapes)
