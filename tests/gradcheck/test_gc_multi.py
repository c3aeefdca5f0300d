"""Several inputs and outputs: which are differentiated, and the forms `expected` takes."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from gradcheck import check

D = torch.float64


def _xy(requires: tuple[bool, bool] = (True, True)) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.tensor([1.0, 2.0], dtype=D, requires_grad=requires[0])
    y = torch.tensor([3.0, -1.0], dtype=D, requires_grad=requires[1])
    return x, y


def _f(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return (x * y).sum() + (y**2).sum()


@pytest.mark.parametrize(
    "expected",
    [
        pytest.param(lambda x, y: (y, x + 2 * y), id="per-input-callable"),
        pytest.param((torch.tensor([3.0, -1.0]), torch.tensor([7.0, 0.0])), id="per-input-tensors"),
        pytest.param(
            ((torch.tensor([3.0, -1.0]), torch.tensor([7.0, 0.0])),), id="nested-one-output"
        ),
    ],
)
def test_one_output_two_inputs(expected: Any) -> None:
    report = check(_f, _xy(), expected=expected)

    assert report.passed, str(report)
    assert [(p.output_index, p.input_index) for p in report.pairs] == [(0, 0), (0, 1)]


def test_only_inputs_requiring_grad_are_differentiated() -> None:
    report = check(
        _f, _xy((False, True)), expected=(None, lambda_value := torch.tensor([7.0, 0.0]))
    )

    assert [(p.output_index, p.input_index) for p in report.pairs] == [(0, 1)]
    assert report.pair(0, 1).expected == pytest.approx(lambda_value.tolist())
    assert [i.differentiated for i in report.inputs] == [False, True]


def test_a_wrong_entry_for_one_input_fails_only_that_pair() -> None:
    report = check(_f, _xy(), expected=(torch.tensor([3.0, -1.0]), torch.tensor([7.0, 1.0])))

    assert report.pair(0, 0).passed and not report.pair(0, 1).passed
    assert report.pair(0, 1).failed == (1,)


def test_two_outputs_one_input_and_nested_expected() -> None:
    x = torch.tensor([0.5, 1.0], dtype=D, requires_grad=True)

    def fn(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.sin(x), (x**2).sum()

    report = check(fn, x, expected=lambda x: (torch.diag(torch.cos(x)), 2 * x))
    assert report.passed and [(p.output_index, p.input_index) for p in report.pairs] == [
        (0, 0),
        (1, 0),
    ]
    assert report.pair(0, 0).shape == (2, 2) and report.pair(1, 0).shape == (2,)


def test_two_by_two_nested_expected() -> None:
    def fn(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return (x * y).sum(), (x + y).sum()

    x, y = _xy()
    report = check(fn, (x, y), expected=((y, x), (torch.ones(2), torch.ones(2))))

    assert report.passed and len(report.pairs) == 4


def test_integer_outputs_and_non_tensor_inputs_pass_through() -> None:
    def fn(x: torch.Tensor, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
        return scale * x**2, x.argmax()

    x = torch.tensor([1.0, 3.0], dtype=D, requires_grad=True)
    report = check(fn, (x, 2.5), expected=(lambda x, s: torch.diag(2 * s * x)))

    assert report.passed
    assert [o.index for o in report.outputs if o.differentiated] == [0]
    assert [(p.output_index, p.input_index) for p in report.pairs] == [(0, 0)]


def test_an_output_cut_from_the_graph_is_noted_and_blamed_on_autograd() -> None:
    report = check(
        lambda x: torch.sin(x).detach() * 2, torch.tensor([0.1, 0.2], dtype=D, requires_grad=True)
    )

    assert not report.passed and report.pair(0, 0).blame == "autograd"
    assert any("output 0 does not require grad" in n for n in report.notes)
