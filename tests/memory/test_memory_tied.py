"""A tensor with several consumers (tied weights, a leaf used twice): its gradients are summed into a new tensor."""

from __future__ import annotations

import pytest
import torch
from mem_oracle import StepSpec, memtracker_peak
from mem_zoo import LeafTwice, TiedPair, UsedTwice

from graphviz_app.memory import advise_checkpoints, forecast, measure


def _spec(cls: type[torch.nn.Module], inputs: torch.Tensor, **kw: int) -> StepSpec:
    return StepSpec(lambda: cls(**kw), lambda batch: ((inputs,), {}), lambda out: out)


@pytest.mark.parametrize("batch", [1, 8])
def test_a_leaf_used_twice_by_hand(batch: int) -> None:
    # w (d x d) used by x @ w and by (.) @ w.t(): backward holds the loss (4 B) and the gradient backward()
    # starts from (4 B); at w's AccumulateGrad the first gradient (a view through t()) waits in the buffer
    # while the second is made, and torch sums the two into a third tensor: 3 x 4 d^2 bytes, at any batch.
    d = 16
    x = torch.randn(batch, d)
    hand = 4 + 4 + 3 * 4 * d * d
    m = measure(LeafTwice(d), x)
    assert m.measured.peak_bytes == hand
    assert m.predicted.peak_bytes == hand
    assert memtracker_peak(_spec(LeafTwice, x, d=d), batch).peak_bytes == hand
    assert forecast(LeafTwice(d), x).peak_bytes == hand


@pytest.mark.parametrize("batch", [1, 8])
def test_tied_embeddings_match_memtracker_to_the_byte(batch: int) -> None:
    ids = torch.randint(0, 64, (batch, 16), generator=torch.Generator().manual_seed(0))
    m = measure(TiedPair(64, 16), ids)
    oracle = memtracker_peak(_spec(TiedPair, ids, vocab=64, d=16), batch).peak_bytes
    assert m.measured.peak_bytes == oracle
    assert m.predicted.peak_bytes == oracle
    assert forecast(TiedPair(64, 16), ids).peak_bytes == oracle


@pytest.mark.parametrize("batch", [1, 8])
def test_the_checkpoint_advice_counts_a_weight_used_twice_as_the_forecast_does(batch: int) -> None:
    x = torch.randn(batch, 16)
    predicted = forecast(UsedTwice(), x).peak_bytes
    oracle = memtracker_peak(StepSpec(UsedTwice, lambda b: ((x,), {}), lambda out: out), batch).peak_bytes
    plan = advise_checkpoints(UsedTwice(), x, budget_bytes=1)
    # By hand, at any batch: the loss and its gradient (4 + 4) and, at w's AccumulateGrad, three 16 x 16 gradients
    # of w (3 x 1,024). Before, the plan replayed the graph as a plain step sums (2,120 B at batch 1, 2,568 at 8)
    # beside a forecast of 3,080 B in one report.
    assert plan.predicted_peak_before == predicted == oracle == 4 + 4 + 3 * 1_024
