"""fn that computes part of its result under no_grad / inference_mode: the check says finite differences include
that part and autograd does not, and blames neither."""

from __future__ import annotations

import pytest
import torch

from gradcheck import Blame, check


def _x() -> torch.Tensor:
    torch.manual_seed(0)
    return torch.randn(5, dtype=torch.float64, requires_grad=True)


def _scaled_by_no_grad_sum(x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        s = x.sum()
    return x * s


def _shifted_by_inference_mean(x: torch.Tensor) -> torch.Tensor:
    with torch.inference_mode():
        m = x.mean()
    return x.sin() + m.clone()


@pytest.mark.parametrize(("fn", "call"), [(_scaled_by_no_grad_sum, "sum"), (_shifted_by_inference_mean, "mean")],
                         ids=["no_grad", "inference_mode"])
def test_a_detached_block_feeding_the_output_blames_neither_side(fn: object, call: str) -> None:
    report = check(fn, _x())  # type: ignore[arg-type]
    assert not report.passed
    assert [p.blame for p in report.pairs] == [Blame.DETACHED]
    note = next(n for n in report.notes if "torch.no_grad() or torch.inference_mode()" in n)
    assert call in note and "without either being wrong" in note
    text = str(report)
    assert "neither side wrong" in text and "backward is likely wrong" not in text


def test_a_hand_gradient_matching_autograd_is_not_called_a_shared_mistake() -> None:
    report = check(_scaled_by_no_grad_sum, _x(), expected=lambda x: torch.diag(torch.full_like(x, float(x.sum()))))
    assert [p.blame for p in report.pairs] == [Blame.DETACHED]
    assert "may share one mistake" not in str(report)


def test_a_wrong_backward_without_a_detached_block_is_still_blamed() -> None:
    class _Twice(torch.autograd.Function):
        @staticmethod
        def forward(ctx: torch.autograd.function.FunctionCtx, x: torch.Tensor) -> torch.Tensor:
            return x * 3

        @staticmethod
        def backward(ctx: torch.autograd.function.FunctionCtx, g: torch.Tensor) -> torch.Tensor:
            return g * 6

    report = check(_Twice.apply, _x())
    assert [p.blame for p in report.pairs] == [Blame.AUTOGRAD]
    assert not any("no_grad" in n and "neither" in n for n in report.notes)


def test_a_no_grad_block_that_does_not_feed_the_output_passes() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            _ = x.norm()  # a statistic, logged and not used
        return x.tanh()

    assert check(fn, _x()).passed


def test_the_report_carries_the_blame_in_its_json() -> None:
    data = check(_scaled_by_no_grad_sum, _x()).to_dict()
    assert data["pairs"][0]["blame"] == "detached"



def test_the_page_says_neither_side_is_wrong() -> None:
    from graphviz_app.jobs.page import check_job
    from graphviz_app.web.present import verdict
    from graphviz_app.web.urlstate import Options

    program = "x = torch.randn(4, requires_grad=True)\nwith torch.no_grad():\n    s = x.sum()\n(x * s).sum()"
    found = check_job(program, Options(), "x", "x.sum() + 0 * x", (1e-6, 1e-5, 1e-3))
    shown = verdict(found)  # type: ignore[arg-type]
    assert not shown.passed and "neither side is wrong" in shown.headline
    assert "backward is wrong" not in shown.headline + shown.detail
