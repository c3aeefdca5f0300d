"""`check`: autograd, finite differences and a hand-derived gradient, compared."""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import torch

from gradcheck._chunks import OutOfMemory
from gradcheck._complex import complex_inputs, complex_notes, real_args, with_complex_inputs
from gradcheck._devices import resolve_device, same_device_error
from gradcheck._inputs import as_tuple, differentiated_indices, refuse_unusable
from gradcheck._run import run_fast, run_full
from gradcheck._state import (
    DEFAULT_DETAIL_LIMIT,
    DEFAULT_MEMORY_BUDGET,
    CheckOptions,
    CheckOutcome,
    Clock,
    RunState,
    kinks_note,
    oom_report,
    resolve_budget,
)
from gradcheck.errors import CheckMemoryError, GradcheckError, GradcheckWarning, GradientMismatchError, InputError
from gradcheck.report import Report

__all__ = ["check", "run_check", "raised_here"]


def check(
    fn: Callable[..., Any],
    inputs: Any,
    *,
    expected: Any = None,
    expected_hessian: Any = None,
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
    modes: tuple[str, ...] = ("rev",),
    order: int = 1,
    kinks: str = "fail",
    screen: bool | None = None,
) -> Report:
    """Checks fn's autograd gradients (and a hand-derived one) against finite differences.

    Args:
        fn: takes the inputs' tensors, returns a tensor or a tuple of tensors.
        inputs: a tensor or a tuple of them (non-tensors are passed through). Those
            with requires_grad=True are differentiated, or every floating one if none is.
            Complex tensors are checked as their real views, as torch's gradcheck does.
        expected: the hand-derived gradient: a callable taking the same inputs, or its
            result given directly: one gradient per input (scalar output), or one
            Jacobian (output shape + input shape) per (output, input) pair.
        expected_hessian: with order=2 and a scalar output, the hand-derived Hessian:
            a callable or its values, one (input i shape + input j shape) block per
            pair of inputs, as `expected` takes Jacobians.
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
        seed: seeds fast mode's random vectors and second order's random weights.
        modes: "rev" checks the backward (reverse mode), "fwd" forward mode (jvp)
            against finite differences and reverse mode.
        order: 2 also checks the gradient's own derivatives: its Jacobian by double
            backward and Hessian-vector products, against differences of the gradient.
        kinks: "fail" (the default) fails an element where fn has a kink; "warn" and
            "pass" let a verified kink pass when every gradient given there is a valid
            one-sided or sub-gradient, with a note; "warn" also issues a GradcheckWarning.
        screen: None (the default) screens a reverse-mode float64 check whose every pair has
            more than `detail_limit` elements: 20 x 20 random ±1 probes v^T J u first (40
            evaluations of fn, 20 backward passes per output), every element only when a probe
            misses by more than atol. An element off by more than atol passes every probe with
            probability under 2^-19. True screens any size; False compares every element.

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
    __tracebackhide__ = True  # under pytest, errors point at the caller's line
    with raised_here():
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
            modes=tuple(modes) if isinstance(modes, (list, tuple)) else modes,
            order=order,
            kinks=kinks,
            screen=screen,
        )
        report = run_check(fn, inputs, expected, opts, expected_hessian=expected_hessian).report
    if report.kinks_accepted and kinks == "warn":
        warnings.warn(kinks_note(report.kinks_accepted, kinks), GradcheckWarning, stacklevel=_caller_level())
    if raise_exception and not report.passed:
        if report.memory.out_of_memory:
            raise CheckMemoryError(report)
        raise GradientMismatchError(report)
    return report


def raised_here() -> _RaisedHere:
    """`with raised_here():` re-raises the checker's own errors without the checker's frames."""
    return _RaisedHere()


class _RaisedHere:
    """Re-raises the checker's own errors from the calling frame, without the checker's frames.

    Under pytest a bad argument then shows the test's line and the message, not
    the checker's source (the public entry points set __tracebackhide__). What fn
    or expected raise is not the checker's and keeps its whole traceback.
    """

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: Any) -> None:
        __tracebackhide__ = True
        if isinstance(error, GradcheckError):
            for cause in (error.__cause__, error.__context__):
                if cause is not None:
                    cause.with_traceback(None)
            raise error.with_traceback(None)


def _caller_level() -> int:
    """The stacklevel of the first frame outside this package, for warnings."""
    frame, level = sys._getframe(1), 1
    while frame is not None and str(frame.f_globals.get("__name__", "")).startswith("gradcheck"):
        frame, level = frame.f_back, level + 1  # type: ignore[assignment]
    return level


def run_check(
    fn: Callable[..., Any], inputs: Any, expected: Any, opts: CheckOptions, *, expected_hessian: Any = None
) -> CheckOutcome:
    """`check` without raising on failure, keeping the Jacobians for device comparison."""
    if not callable(fn):
        raise InputError(f"fn must be callable (a function of the input tensors), got {type(fn).__name__}")
    args = as_tuple(inputs)
    refuse_unusable(args)
    if expected_hessian is not None and opts.order != 2:
        raise InputError("expected_hessian is the hand-derived second derivative: pass order=2 with it")
    found = complex_inputs(args)
    args = real_args(args, found)
    device = resolve_device(opts.device, args)
    budget = resolve_budget(opts.memory_budget, device)
    fn_real = with_complex_inputs(fn, found)
    state = RunState(fn_real, args, differentiated_indices(args), device, opts, Clock(), budget, fn_real, fn)
    state.complex_inputs = found
    state.notes += _nonfinite_inputs(args)
    try:
        outcome = run_fast(state, expected) if opts.fast else run_full(state, expected, expected_hessian)
    except OutOfMemory as oom:
        return CheckOutcome(oom_report(state, oom), {}, {})
    except RuntimeError as e:
        translated = None if isinstance(e, GradcheckError) else same_device_error(e, device)
        if translated is None:
            raise
        raise translated from e
    if found or state.complex_outputs:
        extra = complex_notes(inputs if isinstance(inputs, (tuple, list)) else (inputs,), found, state.complex_outputs)
        outcome.report = replace(outcome.report, notes=tuple(extra) + outcome.report.notes)
    return outcome


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
