"""Small models of the five kinds the memory predictions are checked on, and a wrapper for plain functions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

__all__ = ["Fn", "MLP", "CNN", "Encoder", "LSTMClassifier", "TiedLM", "MODELS", "Cube"]


class Cube(nn.Module):
    """(x * w).pow(3).sum(): PowBackward0 makes h.pow(2) and 3 * h.pow(2) before grad * that."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.ones(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x * self.w).pow(3).sum()

    @staticmethod
    def peak_by_hand(rows: int, d: int) -> tuple[int, int]:
        """(the step's peak, S) for x of (rows, d), S = 4 * rows * d bytes, x and w given.

        Backward starts with the loss and its gradient (8 B) and h = x * w, saved by pow (S).
        PowBackward0 computes grad * (3 * h.pow(2)): h.pow(2) and 3 * h.pow(2) are alive with its result (3 S)
        until the expression ends: 8 + 4 S is the peak, 2 S of it the op's temporaries. A replay without
        them would say 8 + 2 S.
        """
        s = 4 * rows * d
        return 8 + 4 * s, s


class Fn(nn.Module):
    """A plain function as a module, so a step can run it."""

    def __init__(self, f: Callable[..., Any]) -> None:
        super().__init__()
        self.f = f

    def forward(self, *xs: Any) -> Any:
        return self.f(*xs)


class MLP(nn.Sequential):
    def __init__(self, width: int = 256) -> None:
        super().__init__(nn.Linear(128, width), nn.ReLU(), nn.Linear(width, width), nn.GELU(), nn.Linear(width, 10))


class CNN(nn.Sequential):
    def __init__(self) -> None:
        super().__init__(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10),
        )


class Encoder(nn.Module):
    def __init__(self, d: int = 64, layers: int = 2) -> None:
        super().__init__()
        layer = nn.TransformerEncoderLayer(d, 4, 2 * d, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        target = torch.zeros(len(x), dtype=torch.long, device=x.device)
        return nn.functional.cross_entropy(self.head(self.encoder(x)[:, 0]), target)


class LSTMClassifier(nn.Module):
    def __init__(self, hidden: int = 64) -> None:
        super().__init__()
        self.lstm = nn.LSTM(32, hidden, num_layers=2, batch_first=True)
        self.fc = nn.Linear(hidden, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _, (h, _) = self.lstm(x)
        return self.fc(h[-1])


class TiedLM(nn.Module):
    """Embedding and output layer share one weight (weight tying)."""

    def __init__(self, vocab: int = 500, d: int = 64) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.mix = nn.Linear(d, d)
        self.out = nn.Linear(d, vocab, bias=False)
        self.out.weight = self.emb.weight

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        logits = self.out(torch.tanh(self.mix(self.emb(idx))))
        return nn.functional.cross_entropy(logits.flatten(0, 1), idx.flatten())


def _inputs(name: str, batch: int) -> tuple[torch.Tensor, ...]:
    if name == "mlp":
        return (torch.randn(batch, 128),)
    if name == "cnn":
        return (torch.randn(batch, 3, 16, 16),)
    if name == "encoder":
        return (torch.randn(batch, 12, 64),)
    if name == "lstm":
        return (torch.randn(batch, 10, 32),)
    return (torch.randint(0, 500, (batch, 12)),)


# name -> (model factory, inputs for a batch size)
MODELS: dict[str, tuple[Callable[[], nn.Module], Callable[[int], tuple[torch.Tensor, ...]]]] = {
    "mlp": (MLP, lambda b: _inputs("mlp", b)),
    "cnn": (CNN, lambda b: _inputs("cnn", b)),
    "encoder": (Encoder, lambda b: _inputs("encoder", b)),
    "lstm": (LSTMClassifier, lambda b: _inputs("lstm", b)),
    "tied": (TiedLM, lambda b: _inputs("tied", b)),
}
