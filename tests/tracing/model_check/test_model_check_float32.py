"""A Function or kernel that runs only in float32 is checked in float32, with float32 tolerances, and says so."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from graphviz_app.analysis.model_check import Status, UnitKind
from graphviz_app.tracing.model_check import check_model


def _silu32(factor: float, only: torch.dtype = torch.float32) -> type[torch.autograd.Function]:
    """x * sigmoid(x) by a 'kernel' that refuses any dtype but `only`; its backward is `factor` x right."""

    def _refuse(x: torch.Tensor) -> None:
        if x.dtype != only:
            raise TypeError(f"this kernel runs in {only} only")

    class Silu32(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
            _refuse(x)
            ctx.save_for_backward(x)
            return x * torch.sigmoid(x)

        @staticmethod
        def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
            (x,) = ctx.saved_tensors
            _refuse(x)
            s = torch.sigmoid(x)
            return g * (s + x * s * (1 - s)) * factor

    return Silu32


class _Act(torch.nn.Module):
    def __init__(self, fn: type[torch.autograd.Function]) -> None:
        super().__init__()
        self.lin, self.fn = torch.nn.Linear(8, 8), fn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn.apply(self.lin(x))  # type: ignore[no-any-return]


def _check(fn: type[torch.autograd.Function], dtype: torch.dtype = torch.float32) -> Any:
    torch.manual_seed(0)
    model = torch.nn.Sequential(_Act(fn), torch.nn.Linear(8, 3)).to(dtype)
    return check_model(model, torch.randn(4, 8, dtype=dtype))


@pytest.mark.parametrize("factor", [1.0, 1.02, 1.05])
def test_a_float32_only_function_is_checked_in_float32_and_agrees_with_torchs_gradcheck(factor: float) -> None:
    fn = _silu32(factor)
    result = _check(fn)
    (unit,) = [v for v in result.verdicts if v.kind == UnitKind.FUNCTION]
    assert unit.status != Status.NOT_CHECKABLE
    assert any(n.startswith("checked in float32 with tolerances scaled to float32 rounding") and
               "this kernel runs in torch.float32 only" in n for n in unit.notes)
    if factor == 1.0:
        assert result.passed and unit.status == Status.PASSED
    else:
        assert result.culprits == (unit,) and unit.ratio == pytest.approx(factor, rel=1e-3)
    # torch's own gradcheck, run in float32 at float32 tolerances, on the Function alone
    x = torch.randn(6, dtype=torch.float32, requires_grad=True)
    with pytest.warns(UserWarning, match="double precision"):
        oracle = torch.autograd.gradcheck(fn.apply, (x,), eps=1e-2, atol=1e-3, rtol=1e-2, raise_exception=False)
    if factor != 1.02:  # 2% is finer than float32 gradcheck's rtol: only the 1.0 and 1.05 rows are torch's to judge
        assert oracle == (factor == 1.0)


def test_a_kernel_that_runs_in_neither_float64_nor_float32_is_not_checkable_and_says_both() -> None:
    result = _check(_silu32(1.0, only=torch.bfloat16), torch.bfloat16)
    (unit,) = [v for v in result.verdicts if v.kind == UnitKind.FUNCTION]
    assert unit.status == Status.NOT_CHECKABLE
    assert unit.reason is not None and "float32 copies" in unit.reason
    assert any("in float64 its forward raised TypeError" in n for n in unit.notes)
