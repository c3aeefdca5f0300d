"""find_repeats: the loss-accumulation leak is found from the graph; single passes are not flagged."""

from __future__ import annotations

import torch
from torch import nn

from graphviz_app import trace
from graphviz_app.analysis.repeats import find_repeats
from graphviz_app.model import Graph


def _accumulated(steps: int) -> tuple[torch.Tensor, nn.Linear]:
    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    total: torch.Tensor | float = 0.0
    for _ in range(steps):
        total = total + model(torch.randn(4, 3)).pow(2).mean()
    assert isinstance(total, torch.Tensor)
    return total, model


def test_accumulated_loss_reports_every_forward_pass() -> None:
    total, model = _accumulated(50)
    found = find_repeats(trace(total, model.named_parameters()))
    assert found is not None
    assert (found.count, found.ops, found.params) == (50, 4, ("bias", "weight"))
    # each step keeps its 4x3 float32 input (48 B) and the 4x1 output it squared (16 B)
    assert found.saved_bytes == 50 * (48 + 16)
    assert "repeats the same 4-op block 50 times over the same parameters (bias, weight)" in str(found)
    assert "loss.item()" in str(found)


def test_count_grows_with_the_steps_and_survives_json() -> None:
    counts = []
    for steps in (2, 5):
        total, model = _accumulated(steps)
        graph = Graph.from_json(trace(total, model.named_parameters()).to_json())
        found = find_repeats(graph)
        counts.append(found.count if found else 0)
    assert counts == [2, 5]


def test_one_forward_pass_is_not_flagged() -> None:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 1))
    assert find_repeats(trace(net(torch.randn(2, 4)).sum(), net.named_parameters())) is None
    x = torch.ones(3, requires_grad=True)
    h = x * 3
    assert find_repeats(trace((h * h + h).sum(), {"x": x})) is None
