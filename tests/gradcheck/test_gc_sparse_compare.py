"""Big, mostly-zero Jacobians are judged on their non-zero elements only, with the same verdict."""

from __future__ import annotations

import pytest
import torch

import gradcheck._compare as compare
from gradcheck import check


class _WrongAtSeven(torch.autograd.Function):
    """x**2 with a backward that is wrong at one element only."""

    @staticmethod
    def forward(ctx, x):  # type: ignore[no-untyped-def, override]
        ctx.save_for_backward(x)
        return x**2

    @staticmethod
    def backward(ctx, g):  # type: ignore[no-untyped-def, override]
        (x,) = ctx.saved_tensors
        grad = 2 * x * g
        grad[7] = grad[7] * 3
        return grad


@pytest.mark.parametrize(
    "fn",
    [lambda x: torch.sin(x) * x**2, _WrongAtSeven.apply, lambda x: torch.zeros_like(x) * x],
    ids=["passing elementwise", "wrong at element 7", "all-zero Jacobian"],
)
def test_sparse_and_dense_judging_agree(fn, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    x = torch.linspace(-2, 2, 300, dtype=torch.float64, requires_grad=True)  # 90,000 > detail limit
    sparse = check(fn, x).to_dict()
    monkeypatch.setattr(compare, "_nonzero_positions", lambda values: None)
    dense = check(fn, x).to_dict()
    for report in (sparse, dense):
        report.pop("timings")
        report.pop("memory", None)
    assert sparse == dense


def test_one_wrong_element_is_found_in_a_big_diagonal_jacobian() -> None:
    x = torch.linspace(-2, 2, 300, dtype=torch.float64, requires_grad=True)
    report = check(_WrongAtSeven.apply, x)
    pair = report.pairs[0]
    assert not report.passed
    assert pair.failed_count == 1
    assert pair.worst.index == (7, 7)
