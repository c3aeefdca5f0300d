"""Small models for the compiled-region, order and diff tests, with their lines known to the tests."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


class TanhMLP(nn.Module):
    """Two linear layers around a tanh, written here so the compiled graph records this file's lines."""

    def __init__(self, width: int = 8) -> None:
        super().__init__()
        self.a = nn.Linear(4, width)
        self.b = nn.Linear(width, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.a(x))  # TANH_LINE
        return self.b(h * 2)  # SCALE_LINE


class BrokenMLP(TanhMLP):
    """The same MLP with a graph break between the layers: two compiled regions."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.a(x))
        torch._dynamo.graph_break()
        return self.b(h * 2)


def line_of(marker: str) -> int:
    """The line number of the line carrying `# marker` in this file."""
    for number, line in enumerate(open(__file__, encoding="utf-8"), start=1):
        if line.rstrip().endswith(f"# {marker}"):
            return number
    raise LookupError(marker)


def transformer_block() -> nn.Module:
    torch.manual_seed(0)
    return nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)


def compiled_output(model: nn.Module, *inputs: torch.Tensor, backend: str = "aot_eager") -> Any:
    """`torch.compile(model, backend=backend)(*inputs).sum()`, compiled afresh."""
    torch.compiler.reset()  # each test compiles its own model
    return torch.compile(model, backend=backend)(*inputs).sum()
