"""Errors: the hierarchy, raise_exception, and the user's own bugs never hidden."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from gradcheck import (
    CheckMemoryError,
    DeviceError,
    GradcheckError,
    GradientAssertionError,
    GradientMismatchError,
    InputError,
    ShapeMismatchError,
    check,
)

D = torch.float64


def _x() -> torch.Tensor:
    return torch.tensor([0.0, 1.0, 2.0], dtype=D, requires_grad=True)


def _seed(x: torch.Tensor) -> torch.Tensor:
    return ((x + 2) ** 2 + 3).mean()


@pytest.mark.parametrize(
    ("error", "bases"),
    [
        (GradcheckError, (RuntimeError,)),
        (InputError, (GradcheckError, ValueError)),
        (ShapeMismatchError, (InputError,)),
        (DeviceError, (GradcheckError,)),
        (CheckMemoryError, (GradcheckError,)),
        (GradientMismatchError, (GradcheckError,)),
        (GradientAssertionError, (AssertionError,)),
    ],
)
def test_hierarchy(error: type, bases: tuple[type, ...]) -> None:
    assert all(issubclass(error, base) for base in bases)


def test_raise_exception_raises_with_the_report() -> None:
    with pytest.raises(
        GradientMismatchError, match="the hand derivation \\(expected\\) is likely wrong"
    ) as caught:
        check(_seed, _x(), expected=lambda x: 2 * (x + 2), raise_exception=True)
    assert caught.value.report.pair(0, 0).constant_ratio == pytest.approx(3.0)


def test_raise_exception_returns_the_report_when_it_passes() -> None:
    assert check(_seed, _x(), raise_exception=True).passed


class Boom(Exception):
    pass


@pytest.mark.parametrize("raise_exception", [False, True])
@pytest.mark.parametrize(
    ("fn", "expected"),
    [
        pytest.param(lambda x: (_ for _ in ()).throw(Boom("bug in fn")), None, id="fn"),
        pytest.param(
            _seed, lambda x: (_ for _ in ()).throw(Boom("bug in expected")), id="expected"
        ),
    ],
)
def test_bugs_in_user_code_propagate_unchanged(
    fn: Any, expected: Any, raise_exception: bool
) -> None:
    with pytest.raises(Boom, match="bug in"):
        check(fn, _x(), expected=expected, raise_exception=raise_exception)


def test_a_bug_only_at_perturbed_points_propagates_too() -> None:
    calls: list[int] = []

    def fn(x: torch.Tensor) -> torch.Tensor:
        calls.append(1)
        if len(calls) > 2:  # fine for autograd and the unperturbed point, then breaks
            raise Boom("bug at a perturbed point")
        return x.sum()

    with pytest.raises(Boom, match="perturbed point"):
        check(fn, _x())


@pytest.mark.parametrize(
    ("fn", "inputs", "options", "message"),
    [
        (_seed, 5, {}, r"inputs must be a tensor or a tuple of tensors, but got int"),
        (_seed, (), {}, r"inputs is empty"),
        (
            _seed,
            torch.tensor([1, 2]),
            {},
            r"no input can be differentiated: expected at least one floating-point or complex tensor, "
            r"found input 0: torch.int64\. Make the inputs to differentiate float tensors",
        ),
        (lambda x: [x.sum(), 1.0], _x(), {}, r"its output 1 is a float"),
        (
            lambda x: "y",
            _x(),
            {},
            r"fn must return a tensor or a tuple of tensors, but it returned str",
        ),
        (
            lambda x: x.argmax(),
            _x(),
            {},
            r"fn returned no floating-point or complex output \(found torch.int64\); integer outputs have no gradient",
        ),
        ("not a function", _x(), {}, r"fn must be callable"),
        (_seed, _x(), {"eps": 0.0}, r"eps must be > 0"),
        (_seed, _x(), {"atol": -1.0}, r"atol must be a finite number >= 0, but got -1.0"),
        (_seed, _x(), {"rtol": float("nan")}, r"rtol must be a finite number >= 0"),
        (_seed, _x(), {"dtype": torch.int64}, r"dtype must be a floating torch dtype"),
        (
            _seed,
            _x(),
            {"memory_budget": 0},
            r"memory_budget must be a positive int \(bytes\) or None, but got 0",
        ),
        (_seed, _x(), {"detail_limit": -1}, r"detail_limit must be an int >= 0"),
        (_seed, _x(), {"seed": 1.5}, r"seed must be an int"),
    ],
)
def test_input_errors_say_what_was_expected(
    fn: Any, inputs: Any, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(InputError, match=message):
        check(fn, inputs, **options)


@pytest.mark.parametrize(
    ("expected", "message"),
    [
        (
            (torch.ones(3), torch.ones(3)),
            r"expected has 2 entries, but the check has 1 checked output\(s\) and 1 differentiated input\(s\)",
        ),
        (
            ((torch.ones(3),), (torch.ones(3),)),
            r"expected\[output\] has 2 entries, but there are 1 checked outputs",
        ),
        ("2*(x+2)/3", r"expected must be a tensor .* Found a str"),
        (torch.ones(3, 3), r"has shape \(3, 3\), but output 0 has shape \(\)"),
    ],
)
def test_expected_errors_name_the_shapes_and_forms(expected: Any, message: str) -> None:
    with pytest.raises(InputError, match=message):
        check(_seed, _x(), expected=expected)
