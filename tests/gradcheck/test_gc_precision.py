"""Precision: float64 finite differences by default, and an explained floor when it is lower."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from custom_functions import TwiceWrongByX, exp_function, square_via

from gradcheck import Blame, check


def _seed(x: torch.Tensor) -> torch.Tensor:
    return ((x + 2) ** 2 + 3).mean()


def test_float32_inputs_pass_because_differences_run_in_float64() -> None:
    x = torch.tensor([0.0, 1.0, 2.0], requires_grad=True)

    default = check(_seed, x)
    # what torch.autograd.gradcheck does with float32: both sides in float32
    torch_like = check(_seed, x, dtype=None)

    assert default.passed and default.numerical_dtype == "float64"
    assert not torch_like.passed and torch_like.numerical_dtype == "float32"


def test_insisting_on_float32_explains_the_error_floor() -> None:
    report = check(_seed, torch.tensor([0.0, 1.0, 2.0], requires_grad=True), dtype=torch.float32)

    assert not report.passed
    assert report.pair(0, 0).blame == Blame.NUMERICAL
    assert report.precision_floor == pytest.approx(
        torch.finfo(torch.float32).eps * 12.667 / 1e-6, rel=1e-3
    )
    note = next(n for n in report.notes if n.startswith("precision floor"))
    assert "float32 with eps=1e-06" in note and "cube root" in note
    assert "within the rounding floor of finite differences in float32" in str(report)


def test_a_bigger_eps_makes_float32_differences_pass() -> None:
    report = check(_seed, torch.tensor([0.0, 1.0, 2.0]), dtype=torch.float32, eps=5e-3)

    assert report.passed, str(report)


def test_float16_eps_below_the_spacing_is_explained() -> None:
    x = torch.tensor([1.0, 2.0], dtype=torch.float16, requires_grad=True)
    report = check(lambda x: x * 3, x, dtype=torch.float16)

    assert not report.passed
    assert report.pair(0, 0).numerical == (0.0, 0.0, 0.0, 0.0)
    assert any("rounds back to x" in n for n in report.notes)
    assert any("autograd ran in float16" in n for n in report.notes)


def test_float16_inputs_still_get_float64_differences() -> None:
    x = torch.tensor([1.0, 2.0], dtype=torch.float16, requires_grad=True)
    report = check(lambda x: x * 3, x)

    assert (
        report.passed and report.autograd_dtype == "float16" and report.numerical_dtype == "float64"
    )


def test_a_function_with_its_own_float32_weights_is_checked_on_float64_copies() -> None:
    weight = torch.tensor([[1.0, 2.0], [3.0, 4.0]])  # float32, captured

    report = check(lambda x: weight @ x, torch.tensor([1.0, -1.0]))

    assert report.numerical_dtype == "float64"
    assert report.passed, str(report)
    note = next(n for n in report.notes if n.startswith("fn holds float32 tensors of its own"))
    assert "(weight)" in note and "your objects are untouched" in note
    assert weight.dtype == torch.float32


def test_a_float32_module_is_checked_in_float64_on_a_cast_copy() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    x = torch.randn(5, 3)

    report = check(model, x)

    assert report.passed, str(report)
    assert (report.autograd_dtype, report.numerical_dtype) == ("float32", "float64")
    assert any("finite differences ran on a float64 copy of it" in n for n in report.notes)
    assert all(p.dtype == torch.float32 for p in model.parameters())


def _bf16(values: torch.Tensor) -> torch.Tensor:
    return values.to(torch.bfloat16).requires_grad_()


def test_a_right_bfloat16_tanh_passes_with_tolerances_for_its_rounding() -> None:
    """Before: blamed on the backward, with a note that explained rounding."""
    x = _bf16(torch.randn(16, generator=torch.Generator().manual_seed(0)))
    report = check(torch.tanh, x)

    assert report.passed, str(report)
    pair = report.pair(0, 0)
    assert pair.rtol == pytest.approx(8 * 2**-7) and pair.atol > report.atol
    assert "against bfloat16 autograd" in str(report)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bfloat16", "float16"])
def test_rounding_beyond_the_tolerance_is_inconclusive_never_the_backward(dtype: torch.dtype) -> None:
    # Near |x| = 3, 1 - tanh^2 loses most of its digits in a low-precision dtype.
    x = torch.linspace(2.5, 3.5, 6).to(dtype).requires_grad_()
    report = check(torch.tanh, x)

    assert check(torch.tanh, x.detach().double().requires_grad_()).passed  # the float64 check passes
    assert not report.passed  # the rounding is beyond even the dtype's tolerances here
    assert {p.blame for p in report.failed_pairs} == {Blame.ROUNDING} and report.inconclusive
    assert str(report).startswith("gradcheck INCONCLUSIVE")
    assert "backward likely wrong" not in str(report)


class _DoubleTanh(torch.autograd.Function):
    """tanh whose backward is twice too large, in any dtype."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        y = torch.tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        return grad * 2 * (1 - y * y)


def test_a_wrong_bfloat16_backward_is_still_blamed_on_the_backward() -> None:
    x = _bf16(torch.randn(8, generator=torch.Generator().manual_seed(1)))
    report = check(_DoubleTanh.apply, x)

    assert not report.passed and report.pair(0, 0).blame == Blame.AUTOGRAD


LOW = [torch.bfloat16, torch.float16]


@pytest.mark.parametrize("dtype", LOW, ids=["bfloat16", "float16"])
def test_forward_mode_and_second_order_get_low_precision_tolerances(dtype: torch.dtype) -> None:
    """Before: the forward pair blamed finite differences ("try another eps"), second order the double backward."""
    x = torch.randn(8, generator=torch.Generator().manual_seed(0)).to(dtype).requires_grad_()

    forward = check(torch.tanh, x, modes=("rev", "fwd"))
    second = check(lambda x: torch.tanh(x).sum(), x, order=2)

    assert forward.passed, str(forward)
    assert second.passed, str(second)
    assert all(p.rtol == pytest.approx(8 * torch.finfo(dtype).eps) for p in second.pairs)


@pytest.mark.parametrize("dtype", LOW, ids=["bfloat16", "float16"])
def test_forward_and_second_order_rounding_is_inconclusive_never_the_derivative(dtype: torch.dtype) -> None:
    x = torch.linspace(2.5, 3.5, 6).to(dtype).requires_grad_()

    report = check(lambda x: torch.tanh(x).sum(), x, modes=("rev", "fwd"), order=2)

    assert report.inconclusive and {p.blame for p in report.failed_pairs} == {Blame.ROUNDING}
    assert {p.check for p in report.failed_pairs} >= {"fwd", "rev2", "hvp"}
    assert "likely wrong" not in str(report)
    assert "the same function's double backward run in float64 agrees" in str(report)


_ExpWrongJvp = exp_function(backward_factor=1.0, jvp_factor=2.0)  # a right backward, a jvp twice too large


# x**2 with a right backward whose own derivative is 1.5 times too large (3 g where 2 g is right).
_SquareWrongTwice = square_via(TwiceWrongByX)


def test_a_wrong_low_precision_jvp_or_double_backward_is_still_blamed() -> None:
    x = torch.tensor([0.5, -1.0, 2.0]).to(torch.bfloat16).requires_grad_()
    forward = check(_ExpWrongJvp.apply, x, modes=("rev", "fwd"))
    second = check(lambda x: _SquareWrongTwice.apply(x).sum(), x, order=2)

    assert forward.pair(0, 0, "rev").passed and forward.pair(0, 0, "fwd").blame == Blame.AUTOGRAD
    assert second.pair(0, 0, "rev").passed
    assert second.pair(0, 0, "rev2").blame == Blame.AUTOGRAD and second.pair(0, 0, "hvp").blame == Blame.AUTOGRAD
