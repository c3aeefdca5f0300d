"""find_repeats on language-model-shaped graphs: one pass is no leak, k accumulated steps are k repeats.

A single forward pass reuses parameters in ways that look like repeats (a
reshape of one input per projection, weight tying, one layer applied again,
q and k from one projection, a recurrent step): none of them is a leak. The
bytes reported are what the copies hold, never more than the graph holds.
"""

from __future__ import annotations

import pytest
import torch
from lm_shapes import LANGUAGE_MODELS, batch, loss_of  # noqa: E402
from torch import nn

from graphviz_app import record, trace  # noqa: E402
from graphviz_app.analysis.repeats import SHOWN_PARAMS, find_repeats  # noqa: E402
from graphviz_app.model import Graph  # noqa: E402


def accumulated(name: str, steps: int) -> tuple[Graph, nn.Module]:
    """`total_loss += loss` over `steps` batches, without backward: the graph holds every step."""
    torch.manual_seed(0)
    model = LANGUAGE_MODELS[name]()
    with record(model):
        total: torch.Tensor | float = 0.0
        for step in range(steps):
            total = total + loss_of(model, batch(step))
    assert isinstance(total, torch.Tensor)
    return trace(total, model), model


def single(name: str) -> Graph:
    """One forward pass and its loss."""
    torch.manual_seed(0)
    model = LANGUAGE_MODELS[name]()
    with record(model):
        loss = loss_of(model, batch(0))
    return trace(loss, model)


@pytest.mark.parametrize("name", sorted(LANGUAGE_MODELS))
def test_one_forward_pass_is_no_leak(name: str) -> None:
    assert find_repeats(single(name)) is None


@pytest.mark.parametrize("steps", [2, 5])
@pytest.mark.parametrize("name", sorted(LANGUAGE_MODELS))
def test_accumulated_steps_are_counted_with_the_bytes_the_graph_holds(name: str, steps: int) -> None:
    graph, model = accumulated(name, steps)
    found = find_repeats(graph)
    assert found is not None
    assert found.count == steps
    held = sum(size for _, size in graph.summary().activation_bytes)
    assert found.saved_bytes <= held
    assert found.saved_bytes == pytest.approx(held, rel=0.05)
    assert found.ops == sum(1 for n in single(name).nodes if n.kind.value == "op")  # a copy is a whole step


@pytest.mark.parametrize("name", sorted(LANGUAGE_MODELS))
def test_the_message_names_the_model_and_a_few_parameters(name: str) -> None:
    graph, model = accumulated(name, 2)
    found = find_repeats(graph)
    assert found is not None and found.module == ""
    text = str(found)
    assert f"in the whole model ({type(model).__name__}) 2 times" in text
    shown = [p for p in found.params if p in text]
    assert shown == list(found.params[:SHOWN_PARAMS])
    assert f"and {len(found.params) - SHOWN_PARAMS} more" in text
    assert "loss.item()" in text


class SharedLayer(nn.Module):
    """ALBERT's trick: one layer applied three times."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Sequential(nn.Linear(8, 8), nn.Tanh())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(3):
            x = self.layer(x)
        return x


class SameProjection(nn.Module):
    """q and k from one projection of one input (tied attention), v from another."""

    def __init__(self) -> None:
        super().__init__()
        self.qk = nn.Linear(8, 8)
        self.v = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k = self.qk(x), self.qk(x)
        return (q @ k.transpose(-1, -2)).softmax(-1) @ self.v(x)


class TiedAutoencoder(nn.Module):
    """The decoder is the encoder's weight transposed."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.linear(torch.relu(self.encoder(x)), self.encoder.weight.t())


@pytest.mark.parametrize(
    ("model", "x"),
    [
        (SharedLayer(), torch.randn(2, 8)),
        (SameProjection(), torch.randn(2, 5, 8)),
        (TiedAutoencoder(), torch.randn(3, 8)),
        (nn.GRU(4, 6), torch.randn(7, 2, 4)),  # on CPU, one op chain per step over the same weights
    ],
    ids=["shared_layer", "same_projection", "tied_weights", "gru"],
)
def test_reusing_parameters_inside_one_pass_is_no_leak(model: nn.Module, x: torch.Tensor) -> None:
    with record(model):
        out = model(x)
    output = out[0] if isinstance(out, tuple) else out
    assert find_repeats(trace(output.sum(), model)) is None


def _encoder() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 8))


@pytest.mark.parametrize(
    "loss_of_passes",
    [
        lambda enc, x: (enc(x[0]) - enc(x[1])).pow(2).sum(),  # a Siamese pair
        lambda enc, x: nn.functional.mse_loss(enc(x[0]), enc(x[0] + 0.1 * x[1])),  # two views of one input
        lambda enc, x: nn.functional.triplet_margin_loss(enc(x[0]), enc(x[1]), enc(x[2])),
        lambda enc, x: nn.functional.cosine_embedding_loss(enc(x[0]), enc(x[1]), torch.ones(2)),
    ],
    ids=["siamese", "consistency", "triplet", "cosine"],
)
def test_one_loss_over_several_passes_of_one_network_is_no_leak(loss_of_passes) -> None:  # noqa: ANN001
    enc = _encoder()
    with record(enc):
        loss = loss_of_passes(enc, torch.randn(3, 2, 4))
    assert find_repeats(trace(loss, enc)) is None


def test_the_losses_of_such_passes_held_over_steps_are_a_leak() -> None:
    enc = _encoder()
    with record(enc):
        total = sum((enc(x[0]) - enc(x[1])).pow(2).sum() for x in torch.randn(3, 2, 2, 4))
    assert isinstance(total, torch.Tensor)
    found = find_repeats(trace(total, enc))
    assert found is not None and found.count == 3


def test_a_leak_of_a_model_that_reuses_its_layer_is_still_found() -> None:
    torch.manual_seed(0)
    model = SharedLayer()
    with record(model):
        total = sum(model(torch.randn(2, 8)).pow(2).mean() for _ in range(4))
    assert isinstance(total, torch.Tensor)
    found = find_repeats(trace(total, model))
    assert found is not None and found.count == 4
