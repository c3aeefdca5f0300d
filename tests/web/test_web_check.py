"""The page's check panel: the gradient of the sum or the full Jacobian, forward mode, second order, kinks."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from graphviz_app.jobs.page import check_job
from graphviz_app.web import present
from graphviz_app.web.results import CHECKED_JACOBIAN, CHECKED_SUM, CheckModes, Failure, GradientCheck
from graphviz_app.web.urlstate import Options

TOL = (1e-6, 1e-5, 1e-3)
SQUARES = "x = torch.arange(1., 4., requires_grad=True)\nx**2"  # a vector output; .grad shows 2*x
RELU = "x = torch.tensor([0., 1., -1.], requires_grad=True)\ntorch.relu(x).sum()"
APP = Path(__file__).resolve().parents[2] / "graphviz_app" / "web" / "app.py"


@pytest.mark.parametrize(
    ("expected", "checked", "words"),
    [
        ("2*x", CHECKED_SUM, "checked as the gradient of the output's sum, what the .grad table shows"),
        ("torch.diag(2*x)", CHECKED_JACOBIAN, "checked as the output's full Jacobian"),
    ],
    ids=["gradient of the sum", "full Jacobian"],
)
def test_a_vector_output_takes_the_gradient_of_the_sum_or_the_jacobian(expected: str, checked: str, words: str) -> None:
    """Before: only the Jacobian, while the .grad table beside it shows the gradient of the sum."""
    result = check_job(SQUARES, Options(), "x", expected, TOL)

    assert isinstance(result, GradientCheck) and result.passed, result
    assert result.checked == checked
    assert words in present.verdict(result).detail


def test_a_wrong_gradient_of_the_sum_is_still_caught_and_said_to_be_one() -> None:
    result = check_job(SQUARES, Options(), "x", "x", TOL)

    assert isinstance(result, GradientCheck) and not result.passed
    verdict = present.verdict(result)
    assert verdict.headline == "Your gradient d(output)/dx = x is wrong: it is 1/2 × autograd's"
    assert "gradient of the output's sum" in verdict.detail


def test_a_hand_gradient_of_neither_shape_names_both_that_would_do() -> None:
    result = check_job(SQUARES, Options(), "x", "torch.ones(2)", TOL)

    assert isinstance(result, Failure)
    text = str(result)
    assert "has shape (2,)" in text and "gradient of the output's sum (shape (3,)" in text
    assert "full Jacobian (shape (3, 3)" in text


@pytest.mark.parametrize(
    ("kinks", "passes", "warned"), [("fail", False, False), ("warn", True, True), ("pass", True, False)]
)
def test_relu_at_zero_under_each_kinks_setting(kinks: str, passes: bool, warned: bool) -> None:
    result = check_job(RELU, Options(), "x", "(x > 0).double()", TOL, CheckModes(kinks=kinks))

    assert isinstance(result, GradientCheck) and result.passed is passes
    assert bool(result.warnings) is warned
    if passes:
        assert "apart from 1 element(s) at a kink" in present.verdict(result).detail


def test_forward_mode_and_second_order_are_checked_when_asked() -> None:
    result = check_job(SQUARES, Options(), "x", "2*x", TOL, CheckModes(forward=True, order=2))

    assert isinstance(result, GradientCheck) and result.passed, result.text
    assert {p["check"] for p in result.report["pairs"]} == {"rev", "fwd", "rev2", "rev2-u", "hvp"}
    assert "Forward mode and second order agree too." in present.verdict(result).detail


def test_a_derivation_that_repeats_the_backwards_mistake_is_called_shared() -> None:
    program = "x = torch.arange(1., 4., requires_grad=True)\ncustom.square_wrong_backward(x).sum()"
    result = check_job(program, Options(), "x", "x", TOL)

    assert isinstance(result, GradientCheck) and not result.passed
    assert [p["blame"] for p in result.report["pairs"]] == ["shared"]
    verdict = present.verdict(result)
    assert verdict.headline.startswith("Your gradient d(output)/dx = x and the backward may share one mistake")
    assert "they may share one mistake" in verdict.detail
    assert "finite differences are unreliable" not in verdict.detail


def _shown(at, kind: str) -> list[str]:  # noqa: ANN001
    return [re.sub(r"\\(.)", r"\1", str(e.value)) for e in getattr(at, kind)]


@pytest.mark.slow
def test_the_panel_checks_the_gradient_of_the_sum_forward_and_second_order_and_lets_a_kink_pass() -> None:
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(APP), default_timeout=120).run()
    at.session_state[f"editor-{at.session_state['editor_rev']}"] = {"value": SQUARES}
    at.button(key="run").click().run()
    at.text_input(key="w_check_expected").input("2*x").run()
    assert not at.exception
    assert any("gradient of the output's sum" in s for s in _shown(at, "success")), _shown(at, "error")
    at.checkbox(key="w_check_forward").check().run()
    at.checkbox(key="w_check_second").check().run()
    assert any("Forward mode and second order agree too." in s for s in _shown(at, "success")), _shown(at, "error")
    at.checkbox(key="w_check_forward").uncheck().run()
    at.checkbox(key="w_check_second").uncheck().run()

    at.session_state[f"editor-{at.session_state['editor_rev']}"] = {"value": RELU}
    at.button(key="run").click().run()
    at.text_input(key="w_check_expected").input("(x > 0).double()").run()
    assert any("a kink" in e for e in _shown(at, "error")), _shown(at, "error")  # kinks="fail" by default
    at.radio(key="w_check_kinks").set_value("warn").run()
    assert any("at a kink" in s for s in _shown(at, "success")), _shown(at, "error")
    assert any("kinks='warn'" in w for w in _shown(at, "warning"))


def test_an_integer_variable_is_named_in_the_float_dtype_advice() -> None:
    result = check_job("y = torch.tensor([1, 2])\ny.sum()", Options(), "y", "y", TOL)

    assert isinstance(result, Failure)
    assert "y has dtype int64, which has no gradient: make y a float tensor" in str(result)
    assert "input 0" not in str(result)


def test_forward_mode_through_a_custom_function_in_the_panel() -> None:
    program = "x = torch.arange(1., 4., requires_grad=True)\ncustom.cube(x).sum()"
    result = check_job(program, Options(), "x", "3*x**2", TOL, CheckModes(forward=True, order=2))

    assert isinstance(result, GradientCheck) and result.passed, result
    assert result.report["forward_method"] == "vmap(jvp)"


def test_a_large_jacobian_passed_on_the_screen_says_so_in_the_panel() -> None:
    """A 120 x 120 Jacobian is over the detail limit: the panel says the probes agreed, not every element."""
    program = "x = torch.linspace(-1, 1, 120, dtype=torch.float64, requires_grad=True)\ntorch.sin(x)"
    result = check_job(program, Options(), "x", "torch.diag(torch.cos(x))", TOL)

    assert isinstance(result, GradientCheck) and result.passed, result
    assert result.report["mode"] == "screened"
    detail = present.verdict(result).detail
    assert "in random probes v^T J u of the whole Jacobian" in detail and "at every element" not in detail
