"""Checker honesty: NaN never passes, float32 layers, short reprs, pytest tracebacks."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from gradcheck import Blame, check
from graphviz_app.cli import commands as cli

ROOT = Path(__file__).resolve().parents[2]
F64 = torch.float64

NONFINITE = [
    ("all-NaN output", lambda x: x * float("nan"), torch.ones(3, dtype=F64), {}, ["autograd", "numerical"]),
    ("NaN input", lambda x: x * 2, torch.tensor([1.0, float("nan")], dtype=F64), {}, ["numerical"]),
    ("eps=1e300 overflows", lambda x: x**2, torch.ones(3, dtype=F64), {"eps": 1e300}, ["numerical"]),
    ("infinite gradient", lambda x: x.sqrt(), torch.tensor([0.0, 1.0], dtype=F64), {}, ["autograd", "numerical"]),
]


@pytest.mark.parametrize(("fn", "x", "options", "sides"), [c[1:] for c in NONFINITE], ids=[c[0] for c in NONFINITE])
def test_a_nan_or_inf_on_either_side_fails_with_its_own_message(
    fn: Any, x: torch.Tensor, options: dict[str, Any], sides: list[str]
) -> None:
    """Before: passed=True with "max abs error inf"."""
    report = check(fn, x.requires_grad_(), **options)
    pair = report.pair(0, 0)
    assert not report.passed and pair.blame == Blame.NONFINITE
    assert [side for side, _ in pair.nonfinite] == sides
    text = str(report)
    assert "FAIL: NaN/Inf values" in text and "nothing can be compared there" in text
    assert report.to_dict()["pairs"][0]["blame"] == "nonfinite"


def test_nan_inputs_are_named_in_a_note() -> None:
    report = check(lambda x: x * 2, torch.tensor([1.0, float("nan")], dtype=F64, requires_grad=True))
    assert "input 0 holds 1 NaN/Inf value(s)" in "\n".join(report.notes)


def test_nan_in_fast_mode_fails_too() -> None:
    report = check(lambda x: x * float("nan"), torch.ones(3, dtype=F64, requires_grad=True), fast=True)
    assert not report.passed and report.pairs[0].blame == Blame.NONFINITE


def test_cli_check_of_a_nan_function_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    """Before: `graphviz-app check` printed a pass and exited 0."""
    code = cli.main(["check", "torch.sqrt(x - 5).sum()", "--var", "x=torch.arange(3., requires_grad=True)"])
    out = capsys.readouterr().out
    assert code == cli.EXIT_CHECK_FAILED
    assert "FAIL: NaN/Inf values" in out


def _float32_layer() -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    return nn.Linear(3, 2), torch.randn(4, 3, requires_grad=True)


def test_a_function_holding_a_float32_layer_passes_by_default() -> None:
    """Before: "finite differences unreliable" and advice to use dtype=torch.float64, the default."""
    layer, x = _float32_layer()
    report = check(lambda x: torch.tanh(layer(x)), x)
    assert report.passed, str(report)
    assert report.numerical_dtype == "float64"
    assert any("fn holds float32 tensors of its own (layer)" in n for n in report.notes)
    assert layer.weight.dtype == torch.float32  # the user's layer is untouched


def test_a_bound_method_and_a_partial_are_cast_too() -> None:
    import functools

    layer, x = _float32_layer()
    assert check(layer.forward, x).passed
    scale = torch.tensor(2.0)
    assert check(functools.partial(torch.mul, other=scale), x).passed


def test_expected_receives_float64_as_documented() -> None:
    """Before: expected got float32 copies and crashed on the float32 layer it used."""
    layer, x = _float32_layer()
    seen: list[torch.dtype] = []

    def by_hand(x: torch.Tensor) -> torch.Tensor:
        seen.append(x.dtype)
        return torch.autograd.functional.jacobian(lambda t: layer(t), x)

    report = check(lambda x: layer(x), x, expected=by_hand)
    assert seen == [torch.float64] and report.expected_dtype == "float64"
    assert report.passed, str(report)


def _hidden_layer() -> Any:
    layer, _ = _float32_layer()

    def helper(x: torch.Tensor) -> torch.Tensor:  # the layer is one call deeper: not cast
        return layer(x)

    return lambda x: torch.tanh(helper(x)) * 3


def test_a_function_mixing_dtypes_deeper_gets_a_step_and_tolerances_for_float32() -> None:
    _, x = _float32_layer()
    report = check(_hidden_layer(), x)
    assert report.passed, str(report)
    assert report.numerical_dtype == "float32" and report.eps > 1e-3
    note = next(n for n in report.notes if n.startswith("fn computes in float32"))
    assert "chosen for float32" in note and "module.double()" in note
    assert "dtype=torch.float64 (the default)" not in str(report)


def test_a_wrong_backward_still_fails_in_float32() -> None:
    class WrongSin(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, t: torch.Tensor) -> torch.Tensor:
            ctx.save_for_backward(t)
            return t.sin()

        @staticmethod
        def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
            (t,) = ctx.saved_tensors
            return g * t.cos() * 1.05  # 5% off

    hidden = _hidden_layer()
    _, x = _float32_layer()
    report = check(lambda x: WrongSin.apply(hidden(x)), x)
    assert not report.passed and report.pairs[0].blame == Blame.AUTOGRAD


def test_given_tolerances_are_kept_and_the_advice_names_working_ones() -> None:
    _, x = _float32_layer()
    report = check(_hidden_layer(), x, eps=1e-5)
    assert report.eps == 1e-5
    note = next(n for n in report.notes if n.startswith("fn computes in float32"))
    assert "You set eps/atol/rtol; for float32 about eps=" in note
    assert "dtype=torch.float64 (the default)" not in str(report)


def test_report_repr_is_one_short_line_saying_how_to_see_more() -> None:
    """Before: the dataclass repr, 2 KB for a 3-element check."""
    x = torch.arange(3.0, requires_grad=True)
    report = check(lambda x: (x**2).sum(), x)
    text = repr(report)
    assert len(text) < 250 and "\n" not in text
    assert text.startswith("<gradcheck Report: passed, 1 (output, input) pair(s)")
    assert "print(report)" in text
    pair_text = repr(report.pairs[0])
    assert len(pair_text) < 200 and pair_text.startswith("<PairReport rev output 0, input 0: passed")


TEST_FILE = textwrap.dedent(
    """
    import torch
    from gradcheck import assert_gradients

    def test_fixture(gradcheck):
        x = torch.tensor([0.0, 1.0, 2.0], requires_grad=True)
        gradcheck(lambda x: (x ** 2).sum(), x, expected=lambda x: 3 * x)

    def test_direct():
        x = torch.tensor([0.0, 1.0, 2.0], requires_grad=True)
        assert_gradients(lambda x: (x ** 2).sum(), x, expected=lambda x: 3 * x)
    """
)


@pytest.mark.slow
def test_pytest_failures_show_the_report_not_the_library_source(tmp_path: Path) -> None:
    """Before: 54 lines of gradcheck's own source before the report."""
    (tmp_path / "test_user.py").write_text(TEST_FILE)
    # Without CI set: under CI pytest repeats each failure's message in full in the short
    # summary, which would count the report's verdict twice per test.
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "BUILD_NUMBER")}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_user.py"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
    )
    assert done.returncode == 1, done.stdout[-3000:]
    out = done.stdout
    assert out.count("FAIL: expected (hand derivation) likely wrong") == 2
    library = ("def assert_gradients", "report = check(", "return assert_gradients(", "raise GradientAssertionError")
    for library_line in library:
        assert library_line not in out
    assert "gradcheck/assertions.py" not in out and "gradcheck/pytest_plugin.py" not in out
