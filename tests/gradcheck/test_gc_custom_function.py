"""Custom autograd.Functions: a wrong backward is blamed on autograd, a right one passes."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from gradcheck import Blame, check


def _square_old(factor: float) -> type[torch.autograd.Function]:
    """Old-style Function (forward takes ctx): cannot be vmapped."""

    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
            ctx.save_for_backward(x)
            return x**2

        @staticmethod
        def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
            (x,) = ctx.saved_tensors
            return grad * factor * x

    return Square


def _square_new(factor: float) -> type[torch.autograd.Function]:
    """New-style Function with setup_context and a generated vmap rule."""

    class Square(torch.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(x: torch.Tensor) -> torch.Tensor:
            return x**2

        @staticmethod
        def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
            ctx.save_for_backward(inputs[0])

        @staticmethod
        def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
            (x,) = ctx.saved_tensors
            return grad * factor * x

    return Square


X = torch.tensor([0.5, -1.0, 2.0, 3.0], dtype=torch.float64)

CASES = [
    # id, Function, passes, the way finite differences ran
    ("old-style-right", _square_old(2.0), True, "loop"),
    ("old-style-wrong", _square_old(1.0), False, "loop"),
    ("new-style-right", _square_new(2.0), True, "vmap"),
    ("new-style-wrong", _square_new(1.0), False, "vmap"),
]


@pytest.mark.parametrize(
    ("fn_class", "passes", "fd_method"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_verdict_and_blame(fn_class: Any, passes: bool, fd_method: str) -> None:
    report = check(fn_class.apply, X.clone().requires_grad_(), expected=lambda x: torch.diag(2 * x))

    assert report.passed is passes
    assert report.numerical_method == fd_method
    pair = report.pair(0, 0)
    if passes:
        assert pair.blame == Blame.NONE
    else:
        assert pair.blame == Blame.AUTOGRAD
        assert pair.constant_ratio == pytest.approx(0.5)
        assert pair.failed == (0, 5, 10, 15)  # the diagonal of the 4x4 Jacobian
        assert "the backward (autograd) is likely wrong" in str(report)


def test_wrong_backward_without_expected_still_points_at_autograd() -> None:
    report = check(_square_old(1.0).apply, X.clone().requires_grad_())

    assert not report.passed
    assert report.pair(0, 0).blame == Blame.AUTOGRAD
    assert "autograd disagrees with finite differences: the backward is likely wrong" in str(report)


class _MulWrongY(torch.autograd.Function):
    """x * y whose backward gets dy wrong (returns grad * y instead of grad * x)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x, y)
        return x * y

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x, y = ctx.saved_tensors
        return grad * y, grad * y


def test_only_the_wrong_inputs_pair_fails() -> None:
    x = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    y = torch.tensor([3.0, 5.0], dtype=torch.float64, requires_grad=True)

    report = check(lambda x, y: _MulWrongY.apply(x, y).sum(), (x, y))

    assert report.pair(0, 0).passed
    assert not report.pair(0, 1).passed
    wrong = report.pair(0, 1)
    assert wrong.failed == (0, 1)
    assert wrong.autograd == pytest.approx([3.0, 5.0])  # y, where d/dy (x*y) is x
    assert wrong.numerical == pytest.approx([1.0, 2.0])
