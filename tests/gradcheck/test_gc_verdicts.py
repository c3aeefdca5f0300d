"""Verdicts: a mistake the derivation and the backward share, kinks under each `kinks` value."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch
from custom_functions import CubeForgotAPower

from gradcheck import Blame, GradcheckWarning, check

D = torch.float64


def _x(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=D, requires_grad=True)


def test_a_derivation_repeating_the_backwards_mistake_is_called_a_shared_mistake() -> None:
    """Before: finite differences were blamed ("may not be smooth here, or eps ...")."""
    report = check(lambda x: CubeForgotAPower.apply(x).sum(), _x(0.5, 1.5, 2.0), expected=lambda x: 3 * x)

    pair = report.pair(0, 0)
    assert not report.passed and pair.blame == Blame.SHARED
    text = str(report)
    assert (
        "your derivation and the backward agree with each other but not with finite differences: "
        "they may share one mistake" in text
    )
    assert "FAIL: derivation and backward may share a mistake" in text
    assert "may not be smooth here" not in text
    assert report.to_dict()["pairs"][0]["blame"] == "shared"


def test_finite_differences_that_change_with_the_step_are_blamed_not_shared() -> None:
    # exp(200 x) with eps=1e-3: central differences err by eps^2 f''' / 6, far above atol,
    # and the differences at eps and 2 eps disagree by about as much: eps is too large.
    report = check(
        lambda x: torch.exp(200 * x).sum(), _x(0.0, 0.01), eps=1e-3, expected=lambda x: 200 * torch.exp(200 * x)
    )

    assert not report.passed
    assert report.pair(0, 0).blame == Blame.NUMERICAL
    assert "change with the step" in str(report)


def test_a_wrong_backward_with_a_right_derivation_is_still_the_backwards() -> None:
    report = check(lambda x: CubeForgotAPower.apply(x).sum(), _x(0.5, 1.5, 2.0), expected=lambda x: 3 * x**2)

    assert report.pair(0, 0).blame == Blame.AUTOGRAD


def _relu_sum(x: torch.Tensor) -> torch.Tensor:
    return torch.relu(x).sum()


KINKS = [
    # kinks value, passes, blame, accepted elements, warns
    ("fail", False, Blame.NUMERICAL, 0, False),
    ("warn", True, Blame.NONE, 1, True),
    ("pass", True, Blame.NONE, 1, False),
]


@pytest.mark.parametrize(("kinks", "passes", "blame", "accepted", "warns"), KINKS, ids=[k[0] for k in KINKS])
def test_relu_at_zero_under_each_kinks_value(kinks: str, passes: bool, blame: str, accepted: int, warns: bool) -> None:
    """Before: always failed (the CLI exited 1) with the right hand gradient (x > 0)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = check(_relu_sum, _x(0.0, 1.0, -1.0), expected=lambda x: (x > 0).double(), kinks=kinks)

    assert report.passed is passes and report.kinks == kinks
    pair = report.pair(0, 0)
    assert pair.blame == blame and pair.kinks_accepted == accepted == report.kinks_accepted
    warned = [w for w in caught if issubclass(w.category, GradcheckWarning)]
    assert bool(warned) is warns
    if warns:
        assert warned[0].filename == __file__  # points at the caller's line, not the checker
        assert "valid one-sided or sub-gradient" in str(warned[0].message)
    if accepted:
        assert "ok (1 kink(s) accepted)" in str(report)
        assert any(n.startswith(f"kinks={kinks!r}: 1 element(s) passed only because") for n in report.notes)
    else:
        assert "kinks='warn' or 'pass' accepts a valid one-sided gradient" in str(report)


@pytest.mark.parametrize(
    ("fn", "hand", "accepted"),
    [
        pytest.param(
            lambda x: x.abs().sum(), lambda x: torch.sign(x) + 0.5 * (x == 0), 1, id="abs: 0.5 at 0 is a sub-gradient"
        ),
        pytest.param(_relu_sum, lambda x: (x >= 0).double(), 1, id="relu: the right-hand slope 1"),
        pytest.param(lambda x: x.clamp(min=0).sum(), None, 1, id="clamp without a hand gradient"),
    ],
)
def test_any_valid_one_sided_or_sub_gradient_is_accepted(fn: Any, hand: Any, accepted: int) -> None:
    report = check(fn, _x(0.0, 1.0, -1.0), expected=hand, kinks="pass")

    assert report.passed, str(report)
    assert report.kinks_accepted == accepted


class _ReluBadAtZero(torch.autograd.Function):
    """relu whose backward says 5 at 0: no slope of relu is 5."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return x.clamp(min=0)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        return grad * torch.where(x == 0, 5.0, (x > 0).double())


@pytest.mark.parametrize("kinks", ["fail", "warn", "pass"])
def test_a_gradient_outside_the_one_sided_slopes_is_never_accepted(kinks: str) -> None:
    report = check(lambda x: _ReluBadAtZero.apply(x).sum(), _x(0.0, 1.0, -1.0), kinks=kinks)

    assert not report.passed and report.kinks_accepted == 0
    assert report.pair(0, 0).blame == Blame.AUTOGRAD
    assert "outside the one-sided slopes at a kink" in str(report)


def test_a_wrong_hand_gradient_at_a_kink_is_blamed_on_the_hand() -> None:
    report = check(_relu_sum, _x(0.0, 1.0, -1.0), expected=lambda x: (x > 0).double() * 0 + 3, kinks="pass")

    assert not report.passed and report.pair(0, 0).blame == Blame.EXPECTED


def test_a_step_is_not_a_kink_to_accept() -> None:
    # A jump at 0: the second difference halves from eps to 2 eps, so it is no corner.
    report = check(lambda x: (x >= 0).double().mul(x + 1).sum(), _x(0.0, 1.0), kinks="pass")

    assert not report.passed and report.kinks_accepted == 0


@pytest.mark.parametrize(("kinks", "passes"), [("fail", False), ("pass", True)])
def test_a_kink_of_the_gradient_is_found_by_both_second_order_checks(kinks: str, passes: bool) -> None:
    # The gradient of relu(x)**2 is 2 relu(x): a corner at 0 for the double backward and for H v alike.
    report = check(lambda x: torch.relu(x).pow(2).sum(), _x(0.0, 1.0, -1.0), order=2, kinks=kinks)

    assert report.passed is passes and report.pair(0, 0, "rev").passed
    for check_name in ("rev2", "hvp"):
        pair = report.pair(0, 0, check_name)
        assert (pair.blame, pair.kinks_accepted) == ((Blame.NONE, 1) if passes else (Blame.NUMERICAL, 0))
