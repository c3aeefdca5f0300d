"""`check`: autograd, finite differences and a hand-derived gradient, compared."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import torch

from gradcheck._autograd import AutogradResult, autograd_jacobian, first_line
from gradcheck._cast import cast_function
from gradcheck._chunks import OutOfMemory, plan_chunk, run_chunked
from gradcheck._compare import PairData, compare_pair
from gradcheck._devices import resolve_device, same_device_error
from gradcheck._expected import normalize_expected
from gradcheck._fast import analytic_projections, project_fast, random_projections
from gradcheck._inputs import (
    as_tuple,
    autograd_copies,
    call_outputs,
    checked_outputs,
    differentiated_indices,
    numerical_copies,
)
from gradcheck._notes import dtype_label
from gradcheck._numerical import NumericalResult, kink_mask, numerical_jacobian
from gradcheck._state import (
    DEFAULT_DETAIL_LIMIT,
    DEFAULT_MEMORY_BUDGET,
    CheckOptions,
    CheckOutcome,
    Clock,
    RunState,
    build_report,
    oom_report,
    resolve_budget,
)
from gradcheck.errors import CheckMemoryError, GradcheckError, GradientMismatchError, InputError
from gradcheck.report import PairReport, Report

__all__ = ["check", "run_check"]

Pair = tuple[int, int]

_KINK_COLUMNS = 1000  # at most this many failing input elements are probed for kinks


def check(
    fn: Callable[..., Any],
    inputs: Any,
    *,
    expected: Any = None,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    device: str | torch.device | None = None,
    dtype: torch.dtype | None = torch.float64,
    fast: bool = False,
    raise_exception: bool = False,
    memory_budget: int | None = DEFAULT_MEMORY_BUDGET,
    detail_limit: int = DEFAULT_DETAIL_LIMIT,
    seed: int = 0,
) -> Report:
    """Checks fn's autograd gradients (and a hand-derived one) against finite differences.

    Args:
        fn: takes the inputs' tensors, returns a tensor or a tuple of tensors.
        inputs: a tensor or a tuple of them (non-tensors are passed through). Those
            with requires_grad=True are differentiated, or every floating one if none is.
        expected: the hand-derived gradient: a callable taking the same inputs, or its
            result given directly: one gradient per input (scalar output), or one
            Jacobian (output shape + input shape) per (output, input) pair.
        eps: the finite-difference step.
        atol: absolute tolerance: an element passes when |a - b| <= atol + rtol * |b|.
        rtol: relative tolerance, scaled by the reference side b.
        device: None keeps the inputs' device; "cpu", "cuda", "cuda:N" or "auto".
        dtype: the dtype finite differences run in, on cast copies (autograd runs in
            the inputs' own dtype); None keeps the inputs' dtype.
        fast: compare u^T J v for random unit vectors u, v instead of whole Jacobians.
        raise_exception: raise GradientMismatchError (or CheckMemoryError) on failure.
        memory_budget: bytes of working memory one batched chunk may use; None picks
            32 MiB on CPU, and on CUDA 1 GiB or a quarter of the free memory if less.
        detail_limit: pairs up to this many elements keep every element in the report.
        seed: seeds fast mode's random vectors.

    Returns:
        The Report; `report.passed` is the verdict, `str(report)` the readable table.

    Raises:
        InputError: unusable inputs, outputs or options (ShapeMismatchError for `expected`).
        DeviceError: an unavailable device, or inputs (or fn's tensors) on mixed devices.
        GradientMismatchError: gradients disagree and raise_exception is True.
        CheckMemoryError: out of memory even in chunks of one, with raise_exception True.
        Exception: whatever fn or expected raise is never hidden: it propagates.

    Example:
        >>> import torch
        >>> x = torch.tensor([0.0, 1.0, 2.0], requires_grad=True)
        >>> check(lambda x: ((x + 2) ** 2 + 3).mean(), x, expected=lambda x: 2 * (x + 2) / 3).passed
        True
    """
    opts = CheckOptions(
        eps=eps,
        atol=atol,
        rtol=rtol,
        device=device,
        dtype=dtype,
        fast=fast,
        memory_budget=memory_budget,
        detail_limit=detail_limit,
        seed=seed,
    )
    report = run_check(fn, inputs, expected, opts).report
    if raise_exception and not report.passed:
        if report.memory.out_of_memory:
            raise CheckMemoryError(report)
        raise GradientMismatchError(report)
    return report


def run_check(
    fn: Callable[..., Any], inputs: Any, expected: Any, opts: CheckOptions
) -> CheckOutcome:
    """`check` without raising on failure, keeping the Jacobians for device comparison."""
    if not callable(fn):
        raise InputError(
            f"fn must be callable (a function of the input tensors), got {type(fn).__name__}"
        )
    args = as_tuple(inputs)
    device = resolve_device(opts.device, args)
    budget = resolve_budget(opts.memory_budget, device)
    state = RunState(fn, args, differentiated_indices(args), device, opts, Clock(), budget, fn)
    state.notes += _nonfinite_inputs(args)
    try:
        return _run(state, expected)
    except OutOfMemory as oom:
        return CheckOutcome(oom_report(state, oom), {}, {})
    except RuntimeError as e:
        translated = None if isinstance(e, GradcheckError) else same_device_error(e, device)
        if translated is None:
            raise
        raise translated from e


def _nonfinite_inputs(args: Sequence[Any]) -> list[str]:
    notes = []
    for k, x in enumerate(args):
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            bad = int((~torch.isfinite(x.detach())).sum())
            if bad:
                notes.append(
                    f"input {k} holds {bad} NaN/Inf value(s): gradients through them are not "
                    "finite and cannot be checked; check at finite inputs."
                )
    return notes


def _run(state: RunState, expected: Any) -> CheckOutcome:
    opts = state.opts
    leaves = autograd_copies(state.args, state.diff, state.device)
    with state.clock("autograd"):
        if opts.fast:
            with torch.enable_grad():
                graph_outputs = call_outputs(state.fn, leaves)
            state.outputs, state.checked = graph_outputs, checked_outputs(graph_outputs)
        else:
            ag = autograd_jacobian(
                state.fn, leaves, state.diff, budget_bytes=state.budget, device=state.device
            )
            state.outputs, state.checked = ag.outputs, ag.checked
            state.notes += ag.notes
            state.retries = ag.stats.retries
    base = _numerical_base(state)
    opts = state.opts  # the step and tolerances may have been chosen for fn's own dtype
    with state.clock("expected"):
        wanted = _expected(state, expected)
    if opts.fast:
        data = _fast_pairs(state, graph_outputs, leaves, base, wanted)
        with state.clock("compare"):
            pairs = [compare_pair(d, detail_limit=opts.detail_limit) for d in data]
        report = build_report(state, pairs, base, "projection", "projection")
        return CheckOutcome(report, {}, {})
    with state.clock("numerical"):
        nm = numerical_jacobian(
            state.num_fn,
            state.num_args,
            state.diff,
            state.checked,
            base,
            eps=opts.eps,
            budget_bytes=state.budget,
            device=state.device,
        )
    state.stats = nm.stats
    state.notes += nm.notes
    with state.clock("compare"):
        pairs = [_full_pair(state, ag, nm, base, wanted, pair) for pair in ag.jac]
    report = build_report(state, pairs, base, nm.method, ag.method)
    return CheckOutcome(
        report, {p: t.cpu() for p, t in ag.jac.items()}, {p: t.cpu() for p, t in nm.jac.items()}
    )


def _full_pair(
    state: RunState,
    ag: AutogradResult,
    nm: NumericalResult,
    base: list[torch.Tensor],
    wanted: dict[Pair, torch.Tensor],
    pair: Pair,
) -> PairReport:
    """Compares one pair; when it fails, looks for kinks at the failing input elements."""
    o, i = pair
    e = wanted.get(pair)
    data = PairData(
        output_index=o,
        input_index=i,
        output_shape=tuple(state.outputs[o].shape),
        input_shape=tuple(state.args[i].shape),
        autograd=ag.jac[pair].cpu(),
        numerical=nm.jac[pair].cpu(),
        expected=None if e is None else e.reshape(ag.jac[pair].shape).cpu(),
        kinks=None,
        atol=state.opts.atol,
        rtol=state.opts.rtol,
    )
    report = compare_pair(data, detail_limit=state.opts.detail_limit)
    if report.passed:
        return report
    n_in = state.args[i].numel()
    cols = torch.unique(torch.tensor(report.failed, dtype=torch.long) % n_in)[:_KINK_COLUMNS]
    central = nm.jac[pair][:, cols.to(state.device)]
    limit = state.opts.atol + state.opts.rtol * central.abs() + 4 * nm.floors[o]
    found = kink_mask(
        state.num_fn,
        state.num_args,
        pair,
        state.checked,
        base[state.checked.index(o)],
        cols.to(state.device),
        eps=state.opts.eps,
        method=nm.method,
        limit=limit,
    )
    kinks = torch.zeros(state.outputs[o].numel(), n_in, dtype=torch.bool)
    kinks[:, cols] = found.cpu()
    return compare_pair(replace(data, kinks=kinks), detail_limit=state.opts.detail_limit)


def _numerical_base(state: RunState) -> list[torch.Tensor]:
    """Makes the finite-difference copies and fn's outputs there, falling back to own dtypes.

    The float tensors and modules fn holds (itself an nn.Module, its closure, the
    globals it names) are cast on copies too, so fn computes in the check's dtype.
    When fn still fails on cast copies (it mixes dtypes deeper down), the finite
    differences run in the inputs' own dtype, with a step and tolerances chosen
    for that dtype unless given, and a note says so.
    """
    dtype = state.opts.dtype
    state.num_args = numerical_copies(state.args, state.device, dtype)
    cast = cast_function(state.fn, dtype)
    state.num_fn = cast.fn
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
    f_scale = max(
        (float(y.abs().nan_to_num(0.0, 0.0, 0.0).max()) for y in base if y.numel()), default=0.0
    )
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


def _expected(state: RunState, expected: Any) -> dict[Pair, torch.Tensor]:
    if expected is None:
        return {}
    value = expected
    if callable(expected):
        # expected gets the inputs in the dtype finite differences ran in and,
        # like fn, copies of its own float tensors in that dtype.
        num_dtype = state.num_args[state.diff[0]].dtype
        hand = cast_function(expected, num_dtype).fn
        value = hand(*[x.clone() if isinstance(x, torch.Tensor) else x for x in state.num_args])
        state.expected_dtype = dtype_label(state.num_args[i].dtype for i in state.diff)
    else:
        state.expected_dtype = "as given"
    shapes = {
        (o, i): (tuple(state.outputs[o].shape), tuple(state.args[i].shape))
        for o in state.checked
        for i in state.diff
    }
    return normalize_expected(
        value,
        outputs=state.checked,
        inputs=state.diff,
        n_outputs=len(state.outputs),
        n_inputs=len(state.args),
        shapes=shapes,
        device=state.device,
    )


def _fast_pairs(
    state: RunState,
    outs: Sequence[torch.Tensor],
    leaves: Sequence[Any],
    base: list[torch.Tensor],
    wanted: dict[Pair, torch.Tensor],
) -> list[PairData]:
    opts = state.opts
    proj = random_projections(
        {o: state.outputs[o].numel() for o in state.checked},
        {i: state.args[i].numel() for i in state.diff},
        seed=opts.seed,
        device=state.device,
    )
    with state.clock("autograd"):
        analytic = analytic_projections(outs, leaves, state.diff, state.checked, proj)
    state.stats = plan_chunk(budget_bytes=state.budget, item_elements=1, itemsize=1, total=1)
    result: list[PairData] = []

    def work(start: int, stop: int) -> None:
        result[:] = project_fast(
            state.num_fn,
            analytic,
            state.num_args,
            base,
            diff=state.diff,
            checked=state.checked,
            expected=wanted,
            proj=proj,
            eps=opts.eps,
            atol=opts.atol,
            rtol=opts.rtol,
        )

    with state.clock("numerical"):
        run_chunked(1, state.stats, work, state.device)
    state.notes.append(
        f"fast mode: each pair compares the single number u^T J v for random positive unit "
        f"vectors u, v (seed {opts.seed}), with atol scaled by sum(u) * sum(v); a wrong "
        "Jacobian almost never passes, but the failing element is not located. Run with "
        "fast=False to see which elements disagree."
    )
    return result
