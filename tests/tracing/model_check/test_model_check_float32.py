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


class _Tanh(torch.autograd.Function):
    """tanh whose backward is `factor` x right (1.0: right)."""

    factor = 1.0

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        y = torch.tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        return g * (1 - y * y) * _Tanh.factor


class _CastsDown(torch.nn.Module):
    """A linear layer and tanh in the model's dtype, squared and summed after `.float()` (as a loss that upcasts
    half-precision logits does)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (_Tanh.apply(self.lin(x)).float() ** 2).sum()


@pytest.mark.parametrize("factor", [1.0, 1.01])
def test_a_model_whose_output_is_cast_down_is_checked_at_float32s_precision(
        factor: float, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_Tanh, "factor", factor)
    torch.manual_seed(0)
    result = check_model(_CastsDown(), torch.randn(4, 8))
    root = next(v for v in result.verdicts if v.path == "" and v.kind == UnitKind.MODULE)
    assert any("its output is float32 though it ran on float64 copies" in n for n in root.notes)
    if factor == 1.0:  # finite differences at float64's step read float32's rounding as a 15% error
        assert result.passed, str(result)
    else:  # a backward 1% wrong is still found, and named
        assert not result.passed
        culprit = next(v for v in result.verdicts if v.culprit)
        assert culprit.name == "_Tanh.backward" and culprit.ratio == pytest.approx(1.01, abs=1e-3)
