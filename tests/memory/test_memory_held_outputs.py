"""Tensors an output object keeps in a plain attribute (a transformers Cache's keys and values) are held by the user
during backward: counted, never started from."""

from __future__ import annotations

import pytest
import torch
from mem_oracle import measured_as_by_hand

from graphviz_app.tracing.memory.step import step_outputs


class Cache:
    """A plain object holding a tensor, as transformers' DynamicCache holds each layer's keys."""

    def __init__(self, keys: torch.Tensor) -> None:
        self.keys = keys


class WithCache(torch.nn.Module):
    """Returns (loss, Cache(keys)): keys = x * k, saved by no op, kept only by the cache."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.k = torch.nn.Parameter(torch.ones(d))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, Cache]:
        keys = x * self.k
        return keys.sum(), Cache(keys)


def test_a_plain_objects_tensors_are_held_not_started_from() -> None:
    out = WithCache(4)(torch.ones(2, 4))
    named, roots = step_outputs(out)
    assert [p for p, _ in named] == ["output[0]", "output[1].keys"]
    assert roots == ["output[0]"]


@pytest.mark.parametrize("batch", [1, 8])
def test_the_cache_is_counted_as_memtracker_counts_it(batch: int) -> None:
    # rows = 16 per batch item, d = 32; x and k are given. The keys (4 rows d B) stay alive through backward (the
    # cache holds them); MulBackward0 makes grad * x (4 rows d B) and sums it to k's .grad (4 d B) while the loss
    # and its gradient (8 B) are alive: 8 + 2 * 4 rows d + 4 d is the peak.
    d, rows = 32, 16 * batch
    hand = 8 + 2 * 4 * rows * d + 4 * d
    x = torch.randn(rows, d, generator=torch.Generator().manual_seed(0))
    measured_as_by_hand(lambda: WithCache(d), x, batch, hand, loss=lambda out: out[0])
