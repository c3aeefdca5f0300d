"""A corpus of autograd graphs the core tests trace, compare and round-trip.

Each builder returns a fresh `Case`: the outputs to trace and the names of
the leaves (a dict, as torchviz's `make_dot` takes them). Everything is
seeded and small, so a case is cheap to build and always the same graph.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from custom_functions import ScaleSaveBoth, ScaleSaveNone
from torch import nn

__all__ = ["Case", "CORPUS", "build", "CHAIN_LENGTH"]

CHAIN_LENGTH = 900


@dataclass
class Case:
    """Outputs to trace (a tensor or a tuple of them) and leaf names."""

    outputs: Any
    params: dict[str, torch.Tensor] | None = None
    keep: list[Any] = field(default_factory=list)  # modules etc. kept alive with the case


def seed_example() -> Case:
    """The README's first example: y = ((x + 2) ** 2 + 3).mean() at x = arange(3.)."""
    x = torch.arange(3.0, requires_grad=True)
    return Case(((x + 2) ** 2 + 3).mean(), {"x": x})


def mlp() -> Case:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    x = torch.randn(3, 4)
    return Case(model(x), dict(model.named_parameters()), [model])


def cnn_batchnorm() -> Case:
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(4 * 3 * 3, 3),
    )
    x = torch.randn(2, 1, 8, 8)
    return Case(model(x).sum(), dict(model.named_parameters()), [model])


def lstm() -> Case:
    torch.manual_seed(0)
    model = nn.LSTM(4, 5, batch_first=True)
    out, (h, c) = model(torch.randn(2, 3, 4))
    return Case(out.sum() + h.sum(), dict(model.named_parameters()), [model])


def transformer_layer() -> Case:
    torch.manual_seed(0)
    model = nn.TransformerEncoderLayer(
        d_model=8, nhead=2, dim_feedforward=16, dropout=0.0, batch_first=True
    )
    return Case(model(torch.randn(2, 3, 8)).sum(), dict(model.named_parameters()), [model])


def custom_function() -> Case:
    x = torch.arange(3.0, requires_grad=True)
    w = torch.full((3,), 2.0, requires_grad=True)
    return Case(ScaleSaveBoth.apply(x, w).sum(), {"x": x, "w": w})


def custom_function_saving_none() -> Case:
    x = torch.arange(3.0, requires_grad=True)
    w = torch.full((3,), 2.0, requires_grad=True)
    return Case(ScaleSaveNone.apply(x.exp(), w).sum(), {"x": x, "w": w})


def double_backward() -> Case:
    x = torch.arange(1.0, 4.0, requires_grad=True)
    y = (x**3 * x.sin()).sum()
    (grad,) = torch.autograd.grad(y, x, create_graph=True)
    return Case(grad, {"x": x})


def views_inplace() -> Case:
    x = torch.arange(4.0, requires_grad=True)
    w = torch.tensor([2.0, 3.0], requires_grad=True)
    a = x * 2
    a[:2].mul_(w)  # in-place on a view: CopySlices
    a.add_(1)
    out = a.view(2, 2).t()  # an output that is a view: its base is drawn too
    return Case(out, {"x": x, "w": w})


def shared_outputs() -> Case:
    torch.manual_seed(0)
    x = torch.randn(3, requires_grad=True)
    w = torch.randn(3, 3, requires_grad=True)
    h = torch.tanh(w @ x)
    return Case((h.sum(), (h * h).mean(), h.max()), {"x": x, "w": w})


def chain() -> Case:
    x = torch.ones(2, requires_grad=True)
    y = x
    for i in range(CHAIN_LENGTH):
        y = y * 1.5 if i % 3 == 0 else (y.sin() if i % 3 == 1 else y + 1)
    return Case(y, {"x": x})


CORPUS: dict[str, Callable[[], Case]] = {
    "seed_example": seed_example,
    "mlp": mlp,
    "cnn_batchnorm": cnn_batchnorm,
    "lstm": lstm,
    "transformer_layer": transformer_layer,
    "custom_function": custom_function,
    "custom_function_saving_none": custom_function_saving_none,
    "double_backward": double_backward,
    "views_inplace": views_inplace,
    "shared_outputs": shared_outputs,
    "chain_900": chain,
}


def build(name: str) -> Case:
    return CORPUS[name]()
