"""The screen at scale: its tolerance grows with the rounding of its probes, a miss is settled by a second step,
and a miss on a Jacobian too large to compare element by element ends with a verdict and a note, not minutes."""

from __future__ import annotations

import pytest
import torch

from gradcheck import Blame, check
from gradcheck._screen import FULL_WORK_LIMIT, SECOND_STEP

N = 200_000


class _ScaledSquare(torch.autograd.Function):
    """1000 * sum(x^2) with a backward off by `factor` (1.0: right)."""

    factor = 1.0

    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return (x * x).sum() * 1000

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, g: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors  # type: ignore[attr-defined]
        return g * 2000 * x * _ScaledSquare.factor


def _x(n: int = N) -> torch.Tensor:
    torch.manual_seed(0)
    return torch.randn(n, dtype=torch.float64, requires_grad=True)


@pytest.mark.slow  # 200,000 inputs: a few seconds each
@pytest.mark.parametrize("fn", [lambda x: (x * x).sum() * 1000, lambda x: x.exp() * 100, lambda x: x.cumsum(0)],
                         ids=["large scalar", "large elementwise", "cumsum"])
def test_a_correct_gradient_of_200000_inputs_passes_on_the_screen(fn: object) -> None:
    """A probe of sum(x^2) * 1000 carries rounding of about 0.02: over atol, under the scaled tolerance."""
    report = check(fn, _x())  # type: ignore[arg-type]
    assert report.passed and report.mode == "screened", str(report)


@pytest.mark.slow
def test_a_wrong_gradient_of_200000_inputs_fails_and_locates_a_sample(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_ScaledSquare, "factor", 1.01)
    report = check(_ScaledSquare.apply, _x())
    assert not report.passed and report.mode == "screened"
    assert report.pairs[0].blame == Blame.AUTOGRAD  # the two steps agree with each other, not with autograd
    note = next(n for n in report.notes if n.startswith("screen: the probes disagree"))
    assert f"above the {FULL_WORK_LIMIT:,} this check allows" in note and "screen=False" in note
    sampled = next(n for n in report.notes if n.startswith("sampled: "))
    assert "1 x 16 block of output 0, input 0" in sampled and "16 disagree" in sampled  # each one is 1% off


def test_the_same_wrong_gradient_small_is_compared_element_by_element(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_ScaledSquare, "factor", 1.01)
    report = check(_ScaledSquare.apply, _x(2000), screen=True)
    assert not report.passed and report.mode == "full" and report.pairs[0].blame == Blame.AUTOGRAD
    assert report.pairs[0].failed_count > 0


def test_a_miss_from_rounding_is_settled_by_a_second_step() -> None:
    """x + 1e4 rounds x to 1.8e-12: a probe at eps=1e-6 misses by about 5e-5, at 1e-5 it agrees."""
    report = check(lambda x: (x + 1e4).sum() - 1e4 * x.numel(), _x(100), screen=True)
    assert report.passed and report.mode == "screened"
    assert any(f"agreed at a second step of {1e-6 * SECOND_STEP:g}" in n for n in report.notes)


@pytest.mark.slow
def test_one_wrong_element_of_a_large_output_is_still_found() -> None:
    """The scaled tolerance follows rounding, not |J|: an element off by 5e-3 among 200,000 fails the screen."""

    class _OneOff(torch.autograd.Function):
        @staticmethod
        def forward(ctx: torch.autograd.function.FunctionCtx, x: torch.Tensor) -> torch.Tensor:
            ctx.save_for_backward(x)
            return x.sin()

        @staticmethod
        def backward(ctx: torch.autograd.function.FunctionCtx, g: torch.Tensor) -> torch.Tensor:
            (x,) = ctx.saved_tensors  # type: ignore[attr-defined]
            grad = g * x.cos()
            grad[1234] += 5e-3 * g[1234]
            return grad

    report = check(_OneOff.apply, _x())
    assert not report.passed and report.pairs[0].blame == Blame.AUTOGRAD


class _WrongExp(torch.autograd.Function):
    """exp with a backward 1% off: a diagonal Jacobian, 200,000 x 200,000."""

    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, x: torch.Tensor) -> torch.Tensor:
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, g: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors  # type: ignore[attr-defined]
        return g * y * 1.01


@pytest.mark.slow
def test_the_sample_of_a_diagonal_jacobian_lands_on_its_diagonal() -> None:
    torch.manual_seed(0)
    report = check(_WrongExp.apply, torch.randn(400, 500, dtype=torch.float64, requires_grad=True))
    assert not report.passed and report.pairs[0].blame == Blame.AUTOGRAD
    sampled = next(n for n in report.notes if n.startswith("sampled: "))
    assert "16 x 16 block" in sampled and "16 disagree" in sampled
    where = sampled.split("the worst, ")[1].split(":")[0]  # out[r, c] in[r, c]: the same element
    out_index, in_index = where.removeprefix("out").split(" in")
    assert out_index == in_index
