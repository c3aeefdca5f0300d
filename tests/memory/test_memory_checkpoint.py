"""Checkpoint advice: a plan applied lowers the measured peak by about what was predicted."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from graphviz_app.analysis.memory import memory_timeline
from graphviz_app.analysis.memory.checkpoint import checkpointed_timeline, plan_checkpoints
from graphviz_app.tracing.memory.checkpointing import checkpointed, verify_plan
from graphviz_app.tracing.memory.step import Step, run_step


class Block(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(nn.functional.gelu(self.fc1(self.norm(x))))


def _step() -> Step:
    torch.manual_seed(0)
    return Step(nn.Sequential(*[Block(64) for _ in range(4)], nn.Linear(64, 10)), (torch.randn(32, 32, 64),))


def _predicted(step: Step) -> tuple[int, object]:
    run = run_step(step, measure=False)
    return memory_timeline(run.graph, roots=run.roots).peak_bytes, run


@pytest.mark.slow
def test_a_plan_lowers_the_measured_peak_by_the_predicted_amount() -> None:
    step = _step()
    peak, run = _predicted(step)
    plan = plan_checkpoints(run.graph, int(peak * 0.7), roots=run.roots)
    assert plan.reached and plan.modules and set(plan.modules) <= {"0", "1", "2", "3"}
    assert 0 < plan.recompute_flops < plan.forward_flops
    verified = verify_plan(step, plan)
    assert verified.measured_peak_before is not None and verified.measured_peak_after is not None
    assert verified.measured_peak_after < verified.measured_peak_before
    predicted_drop = plan.predicted_peak_before - plan.predicted_peak_after
    measured_drop = verified.measured_peak_before - verified.measured_peak_after
    assert abs(measured_drop - predicted_drop) <= 0.20 * predicted_drop
    assert verified.to_dict()["measured_peak_after"] == verified.measured_peak_after


class _Squash(nn.Module):
    """Three elementwise ops, each saving its own result; the last result is the next Linear's saved input."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(torch.sigmoid(torch.tanh(x)))


def test_a_result_saved_inside_and_outside_the_module_is_recomputed_as_a_copy() -> None:
    # The module's input (the first Linear's output, 1 MiB) is kept by the checkpoint, not its first
    # tanh's result; the last tanh's result stays for the Linear after it, and the recompute makes
    # all three results again (3 MiB) when backward reaches the module.
    torch.manual_seed(0)
    linears = [nn.Linear(256, 256) for _ in range(3)]
    step = Step(nn.Sequential(nn.Linear(256, 256), _Squash(), *linears, nn.Linear(256, 10)), (torch.randn(1024, 256),))
    peak, run = _predicted(step)
    plan = plan_checkpoints(run.graph, int(peak * 0.95), roots=run.roots)
    assert plan.modules == ("1",) and plan.freed == (("1", 2**20),)
    verified = verify_plan(step, plan)
    assert (verified.measured_peak_before, verified.measured_peak_after) == (
        plan.predicted_peak_before, plan.predicted_peak_after)


def test_no_plan_when_the_peak_is_already_under_the_budget() -> None:
    peak, run = _predicted(_step())
    plan = plan_checkpoints(run.graph, peak, roots=run.roots)
    assert plan.modules == () and plan.reached and plan.predicted_peak_after == peak
    assert "already under the peak's budget" in str(plan)


def test_an_unreachable_budget_gives_the_lowest_plan_and_says_so() -> None:
    peak, run = _predicted(_step())
    plan = plan_checkpoints(run.graph, 1, roots=run.roots)
    assert not plan.reached and plan.predicted_peak_after < peak
    assert "not reached" in str(plan)


def test_checkpointed_modules_are_put_back() -> None:
    step = _step()
    with checkpointed(step.model, ["0", "2"]):
        assert "forward" in vars(step.model[0]) and "forward" not in vars(step.model[1])
    assert all("forward" not in vars(m) for m in step.model)


def test_a_residual_block_keeps_its_input_once() -> None:
    # x enters each block twice (its LayerNorm saves it, the residual add reads it): the checkpoint keeps it once.
    # The replay's what-if of checkpointing every block equals the measured step with them checkpointed.
    step = _step()
    run = run_step(step, measure=False)
    blocks = ["0", "1", "2", "3"]
    whatif = checkpointed_timeline(run.graph, blocks, roots=run.roots)
    with checkpointed(step.model, blocks):
        measured = run_step(step, trace_saved=False).measured
    assert measured is not None and whatif.peak_bytes == measured.peak_bytes
