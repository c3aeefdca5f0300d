"""The pytest plugin: the `gradcheck` fixture, the `gradcheck(...)` marker, a cheap import."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from gradcheck import GradientAssertionError, assert_gradients
from gradcheck.pytest_plugin import GradientChecker


def _seed(x: torch.Tensor) -> torch.Tensor:
    return ((x + 2) ** 2 + 3).mean()


X = torch.tensor([0.0, 1.0, 2.0], requires_grad=True)


def test_the_fixture_checks_the_seed_in_one_line(gradcheck: GradientChecker) -> None:
    report = gradcheck(_seed, X, expected=lambda x: 2 * (x + 2) / 3)

    assert report.passed and report.pair(0, 0).expected == pytest.approx([4 / 3, 2.0, 8 / 3])


def test_the_fixture_fails_with_the_readable_report(gradcheck: GradientChecker) -> None:
    with pytest.raises(
        AssertionError, match=r"the hand derivation \(expected\) is likely wrong"
    ) as caught:
        gradcheck(_seed, X, expected=lambda x: 2 * (x + 2))
    assert isinstance(caught.value, GradientAssertionError)
    assert caught.value.report.pair(0, 0).constant_ratio == pytest.approx(3.0)


@pytest.mark.gradcheck(atol=0.2, rtol=0.0)
def test_the_marker_sets_the_fixtures_tolerances(gradcheck: GradientChecker) -> None:
    off_by_a_tenth = lambda x: 2 * (x + 2) / 3 + 0.1  # noqa: E731

    report = gradcheck(_seed, X, expected=off_by_a_tenth)

    assert gradcheck.defaults == {"atol": 0.2, "rtol": 0.0}
    assert report.passed and report.atol == 0.2
    with pytest.raises(AssertionError):
        gradcheck(_seed, X, expected=off_by_a_tenth, atol=1e-5)  # a call's own option wins


def test_assert_gradients_returns_the_report_and_refuses_raise_exception() -> None:
    assert assert_gradients(_seed, X).passed
    with pytest.raises(TypeError, match="assert_gradients always raises on failure"):
        assert_gradients(_seed, X, raise_exception=False)


def test_the_marker_is_registered(pytestconfig: pytest.Config) -> None:
    assert any(line.startswith("gradcheck(**options)") for line in pytestconfig.getini("markers"))


@pytest.mark.slow  # a fresh interpreter that imports torch
def test_loading_the_plugin_does_not_import_torch_and_gradcheck_not_graphviz_app() -> None:
    code = (
        "import sys, gradcheck.pytest_plugin\n"
        "print('torch' in sys.modules)\n"
        "from gradcheck import check\n"
        "import torch\n"
        "check(lambda x: x.sum(), torch.ones(2))\n"
        "print('graphviz_app' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )

    assert out.stdout.split() == ["False", "False"]
