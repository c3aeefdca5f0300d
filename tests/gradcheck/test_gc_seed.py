"""The seeds' running example: y = mean((x+2)^2 + 3) at x = [0, 1, 2], dy/dx = 2(x+2)/3."""

from __future__ import annotations

import pytest
import torch

from gradcheck import Blame, ShapeMismatchError, check


def seed_fn(x: torch.Tensor) -> torch.Tensor:
    a = x + 2
    b = a**2
    c = b + 3
    return c.mean()


@pytest.fixture
def x() -> torch.Tensor:
    return torch.tensor([0.0, 1.0, 2.0], requires_grad=True)


def test_correct_hand_gradient_passes_with_the_seed_values(x: torch.Tensor) -> None:
    report = check(seed_fn, x, expected=lambda x: 2 * (x + 2) / 3)

    assert report.passed
    pair = report.pair(0, 0)
    assert pair.blame == Blame.NONE
    assert pair.expected == pytest.approx([4 / 3, 2.0, 8 / 3])
    assert pair.autograd == pytest.approx([4 / 3, 2.0, 8 / 3], rel=1e-6)
    assert pair.numerical == pytest.approx([4 / 3, 2.0, 8 / 3], rel=1e-8)
    assert str(report).startswith("gradcheck passed")


def test_wrong_hand_gradient_names_the_factor_three_at_every_element(x: torch.Tensor) -> None:
    report = check(seed_fn, x, expected=lambda x: 2 * (x + 2))

    assert not report.passed
    pair = report.pair(0, 0)
    assert pair.blame == Blame.EXPECTED
    assert pair.failed_count == 3 and pair.failed == (0, 1, 2)
    assert pair.constant_ratio == pytest.approx(3.0)
    assert all(e.expected / e.autograd == pytest.approx(3.0) for e in pair.worst_elements)
    text = str(report)
    assert "the hand derivation (expected) is likely wrong" in text
    assert "expected = 3 x autograd at every failing element (3 of 3)" in text
    # one table row per element, each with the ratio 3
    rows = [line for line in text.splitlines() if line.strip().startswith("in[")]
    assert sorted(r.split()[0] for r in rows) == ["in[0]", "in[1]", "in[2]"]
    assert all(r.split()[-2] == "3" for r in rows)


def test_the_users_tensor_is_untouched(x: torch.Tensor) -> None:
    before = x.detach().clone()
    check(seed_fn, x, expected=lambda x: 2 * (x + 2) / 3)

    assert x.dtype == torch.float32 and x.requires_grad and x.grad is None
    assert torch.equal(x.detach(), before)


def test_the_report_says_which_dtype_each_side_ran_in(x: torch.Tensor) -> None:
    report = check(seed_fn, x, expected=lambda x: 2 * (x + 2) / 3)

    assert (report.autograd_dtype, report.numerical_dtype, report.expected_dtype) == (
        "float32",
        "float64",
        "float64",
    )
    assert any("finite differences ran in float64 on cast copies" in n for n in report.notes)


@pytest.mark.parametrize(
    "expected",
    [
        pytest.param(lambda x: 2 * (x + 2) / 3, id="callable"),
        pytest.param(torch.tensor([4 / 3, 2.0, 8 / 3]), id="tensor"),
        pytest.param([4 / 3, 2.0, 8 / 3], id="list-of-floats"),
        pytest.param((torch.tensor([4 / 3, 2.0, 8 / 3]),), id="one-per-input"),
        pytest.param(lambda x: (2 * (x + 2) / 3,), id="callable-returning-tuple"),
    ],
)
def test_expected_gradient_forms_all_pass(x: torch.Tensor, expected: object) -> None:
    report = check(seed_fn, x, expected=expected)

    assert report.passed, str(report)
    assert report.has_expected


def test_expected_of_the_wrong_shape_names_both_shapes(x: torch.Tensor) -> None:
    with pytest.raises(
        ShapeMismatchError,
        match=r"has shape \(1, 3\), but output 0 has shape \(\) and input 0 has shape \(3,\)",
    ):
        check(seed_fn, x, expected=torch.ones(1, 3))
