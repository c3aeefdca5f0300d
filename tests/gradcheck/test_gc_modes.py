"""Forward mode (jvp) against finite differences and reverse mode; second order against differences of the gradient."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from custom_functions import OldSquare, Twice, TwiceWrongByGrad, TwiceWrongByX, exp_function, square_via

from gradcheck import Blame, Check, InputError, check

D = torch.float64


def _x(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=D, requires_grad=True)


FORWARD = [
    # id, backward factor, jvp factor, rev blame, fwd blame
    ("both right", 1.0, 1.0, Blame.NONE, Blame.NONE),
    ("jvp wrong", 1.0, 2.0, Blame.NONE, Blame.AUTOGRAD),
    ("backward wrong", 2.0, 1.0, Blame.AUTOGRAD, Blame.EXPECTED),
]


@pytest.mark.parametrize(
    ("bwd", "jvp", "rev_blame", "fwd_blame"), [c[1:] for c in FORWARD], ids=[c[0] for c in FORWARD]
)
def test_forward_mode_is_checked_against_finite_differences_and_reverse_mode(
    bwd: float, jvp: float, rev_blame: str, fwd_blame: str
) -> None:
    report = check(exp_function(bwd, jvp).apply, _x(0.1, 0.5, 1.0), modes=("rev", "fwd"))

    assert report.modes == ("rev", "fwd") and report.forward_method == "vmap(jvp)"
    assert report.pair(0, 0, "rev").blame == rev_blame
    fwd = report.pair(0, 0, "fwd")
    assert fwd.blame == fwd_blame and fwd.sides == ("forward", "numerical", "reverse")
    text = str(report)
    if fwd_blame == Blame.AUTOGRAD:
        assert "FAIL: forward mode (jvp) likely wrong" in text and "forward = 2 x finite differences" in text
    if fwd_blame == Blame.EXPECTED:
        assert "FAIL: reverse mode likely wrong" in text


def test_a_jvp_and_backward_derived_the_same_wrong_way_are_called_a_shared_mistake() -> None:
    report = check(exp_function(2.0, 2.0).apply, _x(0.1, 0.5, 1.0), modes=("rev", "fwd"))

    assert report.pair(0, 0, "rev").blame == Blame.AUTOGRAD and report.pair(0, 0, "fwd").blame == Blame.SHARED
    text = str(report)
    assert "FAIL: forward and reverse mode may share a mistake" in text
    assert "forward mode (jvp) and reverse mode (the backward) agree with each other but not with finite" in text
    assert "your derivation" not in text


@pytest.mark.parametrize(
    ("fn", "make"),
    [
        (lambda x: torch.softmax(x, dim=-1), lambda: torch.randn(2, 5, dtype=D)),
        (lambda x: torch.nn.functional.layer_norm(x, (4,)), lambda: torch.randn(3, 4, dtype=D)),
        (lambda a, b: torch.tanh(a @ b), lambda: (torch.randn(2, 3, dtype=D), torch.randn(3, 4, dtype=D))),
    ],
    ids=["softmax", "layer_norm", "tanh-matmul"],
)
def test_forward_mode_agrees_with_torchs_check_forward_ad(fn: Callable[..., Any], make: Callable[[], Any]) -> None:
    made = make()
    inputs = tuple(t.requires_grad_() for t in (made if isinstance(made, tuple) else (made,)))
    theirs = torch.autograd.gradcheck(fn, inputs, check_forward_ad=True, raise_exception=False)

    report = check(fn, inputs, modes=("rev", "fwd"))

    assert report.passed is theirs is True
    assert {p.check for p in report.pairs} == {Check.REV, Check.FWD}


class _OldSquareWithJvp(OldSquare):
    @staticmethod
    def jvp(ctx: Any, tangent: torch.Tensor) -> torch.Tensor:
        return tangent * 2 * ctx.x


class _OldSquareWithWrongJvp(OldSquare):
    @staticmethod
    def jvp(ctx: Any, tangent: torch.Tensor) -> torch.Tensor:
        return tangent * ctx.x  # forgets the 2


@pytest.mark.parametrize(
    ("fn_class", "fwd_blame"),
    [(_OldSquareWithJvp, Blame.NONE), (_OldSquareWithWrongJvp, Blame.AUTOGRAD)],
    ids=["right jvp", "wrong jvp"],
)
def test_an_old_style_function_with_a_jvp_is_checked_with_dual_numbers(fn_class: Any, fwd_blame: str) -> None:
    report = check(fn_class.apply, _x(0.5, -1.0, 2.0), modes=("rev", "fwd"))

    assert report.pair(0, 0, "rev").passed
    assert report.pair(0, 0, "fwd").blame == fwd_blame and report.passed is (fwd_blame == Blame.NONE)
    assert report.forward_method == "dual numbers"
    assert any(n.startswith("forward mode ran one column at a time with dual numbers") for n in report.notes)
    if fwd_blame == Blame.AUTOGRAD:
        assert "forward = 0.5 x finite differences" in str(report)


def test_forward_mode_without_any_jvp_is_refused_with_what_to_do() -> None:
    with pytest.raises(InputError, match=r"fn has no forward-mode derivative .* Give its autograd.Function a jvp"):
        check(OldSquare.apply, _x(0.5, -1.0), modes=("rev", "fwd"))


def test_forward_mode_alone_takes_the_hand_gradient_as_its_third_opinion() -> None:
    report = check(lambda x: (x**2).sum(), _x(1.0, 2.0), modes=("fwd",), expected=lambda x: 3 * x)

    assert [p.check for p in report.pairs] == [Check.FWD]
    pair = report.pair(0, 0)
    assert pair.sides == ("forward", "numerical", "expected") and pair.blame == Blame.EXPECTED
    assert report.autograd_method == "none"


# Second order ------------------------------------------------------------------------------------


SECOND = [
    # id, fn, torch's gradgradcheck verdict, the second-order check that fails (or None)
    ("polynomial", lambda x: (x**3).sum(), True, None),
    ("custom, right double backward", lambda x: square_via(Twice).apply(x).sum(), True, None),
    ("custom, double backward wrong by x", lambda x: square_via(TwiceWrongByX).apply(x).sum(), False, Check.REV2),
    (
        "custom, double backward wrong by grad",
        lambda x: square_via(TwiceWrongByGrad).apply(x).sum(),
        False,
        Check.REV2_U,
    ),
    ("non-differentiable backward", lambda x: _DetachedBackward.apply(x).sum(), False, Check.REV2),
    ("vector output", lambda x: torch.tanh(x) * x, True, None),
]


class _DetachedBackward(torch.autograd.Function):
    """x**2 whose backward detaches x: right at first order, zero second derivative."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return x**2

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        return grad * 2 * x.detach()


@pytest.mark.parametrize(("fn", "torch_verdict", "failing"), [c[1:] for c in SECOND], ids=[c[0] for c in SECOND])
def test_second_order_agrees_with_torchs_gradgradcheck(
    fn: Callable[..., Any], torch_verdict: bool, failing: str | None
) -> None:
    x = _x(0.5, -1.0, 2.0)
    theirs = torch.autograd.gradgradcheck(fn, (x,), raise_exception=False)

    report = check(fn, x, order=2)

    assert theirs is torch_verdict
    assert report.passed is theirs, str(report)
    assert report.pair(0, 0, "rev").passed  # first order is right in every case
    assert {p.check for p in report.failed_pairs} <= {failing, Check.HVP}
    if failing is not None:
        assert report.pair(0, 0, failing).blame == Blame.AUTOGRAD
        assert report.pair(0, 0, "hvp").passed is (failing == Check.REV2_U)  # H v moves x only
        assert "FAIL: double backward likely wrong" in str(report)
        assert "the backward is right at first order but its own derivative is wrong" in str(report)


def test_a_hand_hessian_is_the_third_opinion_of_both_second_order_checks() -> None:
    x = _x(0.5, -1.0, 2.0)
    right = check(lambda x: (x**3).sum(), x, order=2, expected_hessian=lambda x: torch.diag(6 * x))
    wrong = check(lambda x: (x**3).sum(), x, order=2, expected_hessian=lambda x: torch.diag(3 * x))

    assert right.passed, str(right)
    assert wrong.pair(0, 0, "rev2").blame == Blame.EXPECTED and wrong.pair(0, 0, "hvp").blame == Blame.EXPECTED
    assert wrong.pair(0, 0, "rev2").constant_ratio == pytest.approx(0.5)


HAND_HESSIAN = [
    # id, hand Hessian of sum(x**2) (2 I is right; the double backward wrong by x says 3 I), blame
    ("right hand Hessian", 2.0, Blame.AUTOGRAD),
    ("hand Hessian repeating the double backward's mistake", 3.0, Blame.SHARED),
]


@pytest.mark.parametrize(("factor", "blame"), [c[1:] for c in HAND_HESSIAN], ids=[c[0] for c in HAND_HESSIAN])
def test_a_hand_hessian_tells_a_wrong_double_backward_from_a_shared_mistake(factor: float, blame: str) -> None:
    """Before: a hand Hessian repeating the double backward's mistake blamed the H v differences."""
    report = check(
        lambda x: square_via(TwiceWrongByX).apply(x).sum(),
        _x(0.5, -1.0, 2.0),
        order=2,
        expected_hessian=lambda x: factor * torch.eye(3, dtype=D),
    )

    assert report.pair(0, 0, "rev").passed and report.pair(0, 0, "rev2-u").passed
    assert report.pair(0, 0, "rev2").blame == blame and report.pair(0, 0, "hvp").blame == blame
    assert report.pair(0, 0, "hvp").constant_ratio == pytest.approx(1.5)
    if blame == Blame.SHARED:
        assert str(report).count("your derivation (the hand Hessian) and the double backward agree") == 2
        assert "FAIL: derivation and double backward may share a mistake" in str(report)


def test_second_order_with_two_inputs_checks_every_block() -> None:
    a, b = _x(0.5, 1.5), _x(-1.0, 2.0)
    report = check(
        lambda a, b: (a * b**2).sum(),
        (a, b),
        order=2,
        expected_hessian=lambda a, b: (
            (torch.zeros(2, 2, dtype=D), torch.diag(2 * b)),
            (torch.diag(2 * b), torch.diag(2 * a)),
        ),
    )

    assert report.passed, str(report)
    assert sorted((p.output_index, p.input_index) for p in report.pairs if p.check == Check.REV2) == [
        (0, 0),
        (0, 1),
        (1, 0),
        (1, 1),
    ]


def test_an_old_style_function_gets_second_order_through_the_recorded_graph() -> None:
    report = check(lambda x: OldSquare.apply(x).sum(), _x(0.5, -1.0, 2.0), order=2)

    assert report.passed, str(report)
    assert report.hvp_method == "double backward"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"expected_hessian": torch.eye(2, dtype=D)},
            r"expected_hessian is the hand-derived second derivative: pass order=2",
        ),
        ({"order": 3}, r"order must be 1 \(gradients\) or 2"),
        ({"modes": ("rev", "backward")}, r"modes must be a non-empty tuple of 'rev', 'fwd'"),
        ({"modes": "fwd"}, r"modes must be a non-empty tuple"),
        ({"kinks": "ignore"}, r"kinks must be one of 'fail', 'warn', 'pass'"),
        ({"fast": True, "order": 2}, r"fast=True compares random projections of the reverse-mode Jacobian only"),
    ],
)
def test_mode_and_order_options_are_validated(options: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError, match=message):
        check(lambda x: (x**2).sum(), _x(1.0, 2.0), **options)


def test_a_hand_hessian_needs_a_scalar_output() -> None:
    with pytest.raises(InputError, match=r"expected_hessian needs fn to return one scalar"):
        check(lambda x: x**2, _x(1.0, 2.0), order=2, expected_hessian=torch.eye(2, dtype=D))
