"""A backward wrong only at a kink (ReLU's derivative at exactly 0) is found; a subgradient passes, and says so."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from graphviz_app.analysis.model_check import Status, UnitKind
from graphviz_app.tracing.model_check import check_model


def _relu(at_zero: float) -> type[torch.autograd.Function]:
    """ReLU whose backward gives `at_zero` x the incoming gradient where the input is exactly 0."""

    class Relu(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
            ctx.save_for_backward(x)
            return x.clamp(min=0)

        @staticmethod
        def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
            (x,) = ctx.saved_tensors
            slope = torch.where(x > 0, 1.0, torch.where(x == 0, at_zero, 0.0)).to(g)
            return g * slope

    return Relu


class _Act(torch.nn.Module):
    def __init__(self, fn: type[torch.autograd.Function]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn.apply(x)  # type: ignore[no-any-return]


def _on_the_kink() -> torch.Tensor:
    torch.manual_seed(0)
    x = torch.randn(4, 6)
    x[0, :3] = 0  # the step's input sits exactly on ReLU's corner here
    x[2, 4] = 0
    return x.requires_grad_()


def _one_sided(fn: type[torch.autograd.Function]) -> tuple[float, float]:
    """The oracle: torch's own one-sided differences of the Function alone at 0, in float64."""
    zero, h = torch.zeros(1, dtype=torch.float64), 1e-6
    right = float((fn.apply(zero + h) - fn.apply(zero)) / h)
    left = float((fn.apply(zero) - fn.apply(zero - h)) / h)
    return min(left, right), max(left, right)


@pytest.mark.parametrize("at_zero", [5.0, -1.0])
def test_a_backward_wrong_only_at_the_kink_is_found_and_said_to_be_at_a_kink(at_zero: float) -> None:
    fn = _relu(at_zero)
    low, high = _one_sided(fn)
    assert not low <= at_zero <= high  # by torch's own differences, no subgradient
    result = check_model(torch.nn.Sequential(_Act(fn), torch.nn.Linear(6, 3)), _on_the_kink())
    (culprit,) = result.culprits
    assert (culprit.kind, culprit.name, culprit.status) == (UnitKind.FUNCTION, "Relu.backward", Status.FAILED)
    assert culprit.reason is not None
    assert culprit.reason.startswith("at a kink: where the step's point sits on a corner")
    assert "no subgradient" in result.first_line()


@pytest.mark.parametrize("at_zero", [0.0, 0.5, 1.0])
def test_a_subgradient_at_the_kink_passes_and_the_verdict_says_the_point_is_inconclusive_there(at_zero: float) -> None:
    fn = _relu(at_zero)
    low, high = _one_sided(fn)
    assert low <= at_zero <= high
    result = check_model(torch.nn.Sequential(_Act(fn), torch.nn.Linear(6, 3)), _on_the_kink())
    assert result.passed, str(result)
    (unit,) = [v for v in result.verdicts if v.kind == UnitKind.FUNCTION]
    notes = [n for n in unit.notes if "crossed a kink" in n]
    if at_zero != 0.5:  # 0.5 is the central difference itself: no probe misses, nothing to say
        (note,) = notes
        assert "at the step's own point the check is inconclusive there" in note
        again = "re-checked at inputs moved off the kink by about 0.0001 x (1 + |x|), in random signs: passed"
        assert again in unit.notes
    off = _on_the_kink().detach() + 1e-3  # moved off the corner, as the note says: a plain pass, no kink
    again = check_model(torch.nn.Sequential(_Act(fn), torch.nn.Linear(6, 3)), off.requires_grad_())
    assert again.passed and not any("kink" in n for v in again.verdicts for n in v.notes)


def test_a_backward_wrong_just_beside_the_kink_is_found_by_the_check_moved_off_it() -> None:
    class NearlyRelu(torch.autograd.Function):
        """ReLU whose backward is 0 up to 1e-3, not up to 0: right at 0, wrong just beside it."""

        @staticmethod
        def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
            ctx.save_for_backward(x)
            return x.clamp(min=0)

        @staticmethod
        def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
            (x,) = ctx.saved_tensors
            return g * (x > 1e-3).to(g)

    x = _on_the_kink()
    assert bool(((x.abs() > 0) & (x.abs() < 1e-3)).sum() == 0)  # wrong nowhere at the step's own point
    result = check_model(torch.nn.Sequential(_Act(NearlyRelu), torch.nn.Linear(6, 3)), x)
    (culprit,) = result.culprits
    assert culprit.name == "NearlyRelu.backward"
    assert culprit.reason is not None and culprit.reason.startswith("off the kink (re-checked at inputs moved off")
