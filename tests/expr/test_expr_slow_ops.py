"""The same limits outside the worker: sizes before allocation, costs for the ops that are slow per element."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
import torch

from graphviz_app.expr import ExprError, Limits, evaluate

# The red team's programs that ran far past 10 s in the CLI, or allocated GBs before saying no.
REFUSED = [
    ("torch.zeros(1000000000, 0).count_nonzero(1)",
     r"count_nonzero\(\.\.\.\) would create a tensor of 1,000,000,000 elements"),
    ("torch.prod(torch.zeros(0, 600000000), 0)", r"torch\.prod\(\.\.\.\) would create a tensor of 600,000,000"),
    ("torch.zeros(0, 600000000).sum(0)", r"would create a tensor of 600,000,000 elements"),
    ("x = torch.zeros(10**8, 0)\nx.mean(1)", r"x\.mean\(\.\.\.\) would create a tensor of 100,000,000 elements"),
    ("x = torch.randn(1, 1, 4000000)\nF.max_pool1d(x, 2000000, stride=1).sum()",
     r"F\.max_pool1d\(\.\.\.\) would take about as long as [\d,]+ multiply-adds \(a window of 2,000,000 read at "
     r"each of 2,000,001 output positions\); the limit is 20,000,000,000"),
    ("x = torch.randn(1, 1, 3000, 3000)\nF.avg_pool2d(x, 1500, stride=1).sum()",
     r"F\.avg_pool2d\(\.\.\.\) would take about as long as .*a window of 1,500x1,500"),
    ("x = torch.randn(3000, 3000)\ntorch.norm(x, p='nuc')",
     r"torch\.norm\(\.\.\.\) would take .*a singular value decomposition of one matrix of 3,000x3,000"),
    ("x = torch.randn(3000, 3000)\nx.norm(p='nuc')", r"x\.norm\(\.\.\.\) would take .*singular value"),
    ("a = torch.randn(2000, 1000)\ntorch.cdist(a, a, p=3).sum()",
     r"torch\.cdist\(\.\.\.\) would take .*4,000,000 distances over 1,000 features at p=3"),
    ("a = torch.randn(2000, 3000)\ntorch.cdist(a, a, p=0.5).sum()", r"at p=0\.5"),
    ("m = nn.LSTM(1, 8)\nx = torch.randn(1000000, 1, 1)\nm(x)[0].sum()",
     r"m\(\.\.\.\) would take about as long as [\d,]+ multiply-adds \(1,000,000 time steps x 1 layer\(s\) x 1 "
     r"direction\(s\) of LSTM\)"),
    ("m = nn.LSTM(1, 8, batch_first=True)\nx = torch.randn(1, 1000000, 1)\nm(x)[0].sum()", r"1,000,000 time steps"),
    ("m = nn.GRU(4, 64, num_layers=2)\nx = torch.randn(100000, 2, 4)\nm(x)[0].sum()", r"2 layer\(s\) .* of GRU"),
    ("m = nn.Sequential(nn.Linear(4, 4), nn.LSTM(4, 8))\nx = torch.randn(300000, 1, 4)\nm(x)[0].sum()",
     r"300,000 time steps"),
]


@pytest.mark.parametrize(("program", "message"), REFUSED, ids=[f"case{i}" for i in range(len(REFUSED))])
def test_slow_or_growing_ops_are_refused_before_they_run(program: str, message: str) -> None:
    start = time.process_time()
    with pytest.raises(ExprError) as info:
        evaluate(program)
    assert re.search(message, info.value.message), info.value.message
    assert info.value.kind == "limit"
    # Refused from shapes, within the time the program may run (CPU time: the machine may be busy).
    assert time.process_time() - start < Limits().max_seconds


ALLOWED = [
    "x = torch.randn(1, 1, 1000)\nF.max_pool1d(x, 10, stride=1).sum()",
    "x = torch.randn(1, 1, 300, 300)\nF.avg_pool2d(x, 15, stride=2).sum()",
    "x = torch.randn(1, 1, 3000, 3000)\nF.avg_pool2d(x, 1500).sum()",  # stride = kernel: 4 windows
    "x = torch.randn(50, 40)\ntorch.norm(x, p='nuc')",
    "x = torch.randn(3000, 3000)\nx.norm(p=2)",  # a vector norm, one pass
    "a = torch.randn(50, 8)\ntorch.cdist(a, a, p=3).sum()",
    "m = nn.LSTM(4, 8, num_layers=2)\nx = torch.randn(50, 3, 4)\nm(x)[0].sum()",
    "m = nn.GRU(4, 8, batch_first=True)\nx = torch.randn(3, 20, 4)\nm(x)[0].sum()",
    "x = torch.zeros(10**4, 0)\nx.mean(1).sum()",
    "x = torch.zeros(5, 0)\n(x.sum(0) + x.count_nonzero(1).sum()).float()",
]


@pytest.mark.parametrize("program", ALLOWED)
def test_the_same_ops_at_sizes_within_the_limits_still_run(program: str) -> None:
    assert isinstance(evaluate(program).output, torch.Tensor)


def test_a_long_sequence_is_sized_without_running_every_step_on_meta(monkeypatch: pytest.MonkeyPatch) -> None:
    # Meta kernels run a recurrent layer step by step in Python (about 20 ms a step for two
    # layers): 400 steps sized that way took 8 s. It is sized from 1 and 2 steps instead.
    from graphviz_app.expr import recurrent

    sized: list[int] = []
    measure = recurrent._measure

    def spy(meta: Any, values: Any, kwargs: Any, dim: int, steps: int) -> tuple[int, int, int]:
        sized.append(steps)
        return measure(meta, values, kwargs, dim, steps)

    monkeypatch.setattr(recurrent, "_measure", spy)
    result = evaluate("m = nn.LSTM(4, 8, num_layers=2)\nx = torch.randn(400, 3, 4)\nm(x)[0].sum()", isolated=False)
    assert sized == [1, 2]
    assert isinstance(result.output, torch.Tensor) and result.output.shape == ()


def test_a_recurrent_call_keeps_what_its_steps_keep_within_the_byte_budget() -> None:
    # 5,000 steps of a 64-wide LSTM on a batch of 4 keep over 200 MB for backward: refused from two measured steps.
    with pytest.raises(ExprError, match=r"every tensor its forward keeps for backward, over 5,000 steps\) would "
                       r"bring the tensors this program created to [\d,]+ bytes"):
        evaluate("m = nn.LSTM(8, 64)\nx = torch.randn(5000, 4, 8)\nm(x)[0].sum()")
