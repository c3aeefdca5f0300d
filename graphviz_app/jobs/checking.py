"""Check a program's gradients against finite differences (and a hand gradient): one path for the page and the CLI.

Runs inside a worker process. Each first run of the program (as a function of
its inputs, and of the hand gradient) is under the language's hard deadline.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from gradcheck import GradcheckWarning, ShapeMismatchError, check

from ..expr.api import expected_function, to_function
from ..expr.errors import ExprError
from ..expr.limits import Limits
from ..expr.validator import parse
from ..runner import HARD_GRACE_S, hard_deadline

# What a hand gradient was read as (the page's words for it).
from ..web.results import CHECKED_GRADIENT, CHECKED_JACOBIAN, CHECKED_SUM
from .programs import TraceOptions, evaluate_program

__all__ = ["CheckRequest", "CheckOutcome", "check_program"]



@dataclass(frozen=True, slots=True)
class CheckRequest:
    """What to check, and how (the options of `gradcheck.check`).

    Attributes:
        wrt: the variables to differentiate; empty: those made with requires_grad=True.
        expected: the hand-derived gradient in the language (one per name, comma-separated), or None.
        expected_label: how messages name `expected` ("--expected" in the CLI).
        device, dtype: the language's defaults for the tensors the program makes.
    """

    wrt: tuple[str, ...] = ()
    expected: str | None = None
    expected_label: str = "the expected gradient"
    device: str | None = None
    dtype: str | None = None
    eps: float = 1e-6
    atol: float = 1e-5
    rtol: float = 1e-3
    fast: bool = False
    modes: tuple[str, ...] = ("rev",)
    order: int = 1
    kinks: str = "fail"
    screen: bool | None = None


@dataclass(frozen=True, slots=True)
class CheckOutcome:
    """The checker's verdict: passed, its report as text and as a dict, its warnings, what was checked."""

    passed: bool
    text: str
    report: dict[str, Any] = field(hash=False)
    wrt: tuple[str, ...]
    warnings: tuple[str, ...] = ()
    checked: str = CHECKED_GRADIENT


def check_program(source: str, request: CheckRequest) -> CheckOutcome:
    """Check the gradients of the program's output by `request.wrt`.

    For a non-scalar output and one variable, the hand gradient may be the gradient of
    the output's sum (the variable's shape: what a `.grad` shows) or the full Jacobian
    (output shape + variable shape); `CheckOutcome.checked` says which was checked.

    Raises:
        ExprError: the program or the hand gradient is refused or fails, or no variable requires grad.
        GradcheckError: the checker cannot check this function (a hand gradient of neither shape included).
    """
    names = list(request.wrt) or _default_wrt(source, request)
    options: dict[str, Any] = {"device": request.device, "dtype": request.dtype}
    with hard_deadline(Limits().max_seconds + HARD_GRACE_S):
        fn, inputs = to_function(source, names, **options)
    hand = None
    checked = CHECKED_GRADIENT
    if request.expected:
        with hard_deadline(Limits().max_seconds + HARD_GRACE_S):
            hand = _labelled(expected_function(source, request.expected, names, **options), request)
            if len(names) == 1:
                fn, checked = _what_to_check(fn, inputs, hand, names[0])
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always", GradcheckWarning)
        report = check(fn, inputs, expected=hand, eps=request.eps, atol=request.atol, rtol=request.rtol,
                       device=request.device, fast=request.fast, modes=request.modes, order=request.order,
                       kinks=request.kinks, screen=request.screen)
    said = tuple(str(w.message) for w in warned if issubclass(w.category, GradcheckWarning))
    return CheckOutcome(report.passed, str(report), report.to_dict(), tuple(names), said, checked)


def _labelled(hand: Callable[..., Any], request: CheckRequest) -> Callable[..., Any]:
    """The hand gradient, its run-time errors (a wrong count of values) said to be in it."""

    def expected(*tensors: Any) -> Any:
        try:
            return hand(*tensors)
        except ExprError as e:
            raise ExprError(f"in {request.expected_label} ({request.expected}): {e.message}", kind=e.kind) from e

    return expected


def _default_wrt(source: str, request: CheckRequest) -> list[str]:
    """The program's inputs made with requires_grad=True."""
    evaluation = evaluate_program(source, TraceOptions(device=request.device, dtype=request.dtype))
    inputs = parse(source).inputs
    names = [n for n, t in evaluation.variables.items() if n in inputs and t.requires_grad and t.is_leaf]
    if not names:
        raise ExprError("no variable requires grad: create one with requires_grad=True, or name the ones to "
                        "differentiate (the CLI's --wrt x,y)", kind="input")
    return names


def _what_to_check(
    fn: Callable[..., Any], inputs: tuple[torch.Tensor, ...], hand: Callable[..., Any], wrt: str
) -> tuple[Callable[..., Any], str]:
    """The function to check and what the hand gradient is read as, from its shape.

    Raises:
        GradcheckError: the hand gradient has neither the shape of `wrt` nor that of the Jacobian.
    """
    with torch.no_grad():
        outs = fn(*inputs)
    outs = tuple(y for y in (outs if isinstance(outs, tuple) else (outs,)) if y.is_floating_point())
    if all(y.numel() == 1 for y in outs):
        return fn, CHECKED_GRADIENT
    x = inputs[0]
    given = hand(*[t.detach().clone() for t in inputs])
    shape = tuple(given.shape) if isinstance(given, torch.Tensor) else None
    if shape == tuple(x.shape):

        def summed(*xs: torch.Tensor) -> torch.Tensor:
            ys = fn(*xs)
            return sum((y.sum() for y in (ys if isinstance(ys, tuple) else (ys,)) if y.is_floating_point()),
                       torch.zeros((), dtype=x.dtype, device=x.device))

        return summed, CHECKED_SUM
    if len(outs) == 1 and shape == tuple(outs[0].shape) + tuple(x.shape):
        return fn, CHECKED_JACOBIAN
    out_shape = " and ".join(_shape(tuple(y.shape)) for y in outs)
    raise ShapeMismatchError(
        f"your d(output)/d{wrt} has shape {'(?)' if shape is None else _shape(shape)}, but the output has shape "
        f"{out_shape} and {wrt} has shape {_shape(tuple(x.shape))}: give the gradient of the output's sum (shape "
        f"{_shape(tuple(x.shape))}, what the .grad table shows) or the full Jacobian (shape "
        f"{_shape(tuple(outs[0].shape) + tuple(x.shape))}, the output's shape then the input's)."
    )


def _shape(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"
