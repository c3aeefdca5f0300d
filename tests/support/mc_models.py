"""Small models, correct or with one planted wrong backward, for the model checker's tests.

Each planted bug marks its line with a `# BUG` comment; `bug_line(obj)` finds it, so the
tests say which line the report must name without hard-coding numbers.
"""

from __future__ import annotations

import inspect
import random
from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F

__all__ = [
    "bug_line", "def_line", "Block", "TinyTransformer", "ConvNet", "Tagger", "TiedLM",
    "WrongFactor", "MissingTerm", "WrongTranspose", "IntegerOnly", "Unseeded", "ExpWrongJvp", "ExpFlatSecond",
    "Through", "Twice", "ScaledIdentity",
]


def bug_line(obj: object) -> int:
    """The line of `obj`'s source marked `# BUG`."""
    lines, start = inspect.getsourcelines(obj)  # type: ignore[arg-type]
    return start + next(k for k, line in enumerate(lines) if "# BUG" in line)


def def_line(fn: Callable[..., object]) -> int:
    """The line of a function's `def` (what a Function's or module's verdict names)."""
    lines, start = inspect.getsourcelines(fn)
    return start + next(k for k, line in enumerate(lines) if line.lstrip().startswith("def "))


class WrongFactor(torch.autograd.Function):
    """Softmax over the last dimension whose backward is 1.02 x the true one."""

    @staticmethod
    def forward(ctx, x):  # type: ignore[no-untyped-def]
        y = x.softmax(-1)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):  # type: ignore[no-untyped-def]
        (y,) = ctx.saved_tensors
        return 1.02 * y * (g - (g * y).sum(-1, keepdim=True))


class MissingTerm(torch.autograd.Function):
    """Softmax whose backward drops the -(g.y) y term."""

    @staticmethod
    def forward(ctx, x):  # type: ignore[no-untyped-def]
        y = x.softmax(-1)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):  # type: ignore[no-untyped-def]
        (y,) = ctx.saved_tensors
        return y * g


class WrongTranspose(torch.autograd.Function):
    """x @ w whose backward for x uses w instead of w.T (w square, so shapes still fit)."""

    @staticmethod
    def forward(ctx, x, w):  # type: ignore[no-untyped-def]
        ctx.save_for_backward(x, w)
        return x @ w

    @staticmethod
    def backward(ctx, g):  # type: ignore[no-untyped-def]
        x, w = ctx.saved_tensors
        return g @ w, x.transpose(-1, -2) @ g


class Attention(nn.Module):
    """Single-head attention; `softmax` may be a planted Function."""

    def __init__(self, d: int, softmax: type[torch.autograd.Function] | None = None) -> None:
        super().__init__()
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.softmax = softmax

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scores = self.q(x) @ self.k(x).transpose(-1, -2) / x.shape[-1] ** 0.5
        weights = scores.softmax(-1) if self.softmax is None else self.softmax.apply(scores)
        return self.o(weights @ self.v(x))


class Mixer(nn.Module):
    """x @ w with a square weight, through a planted Function when asked."""

    def __init__(self, d: int, wrong: bool = False) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(d, d) / d**0.5)
        self.wrong = wrong

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return WrongTranspose.apply(x, self.w) if self.wrong else x @ self.w


class Block(nn.Module):
    """A pre-norm transformer block with dropout; `detach` plants a .detach() on the residual path."""

    def __init__(self, d: int = 8, softmax: type[torch.autograd.Function] | None = None, detach: bool = False,
                 wrong_mixer: bool = False) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = Attention(d, softmax)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.ReLU(), nn.Linear(2 * d, d))
        self.mix = Mixer(d, wrong_mixer)
        self.drop = nn.Dropout(0.1)
        self.detach = detach

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.drop(self.attn(self.ln1(x)))
        if self.detach:
            x = x.detach() + self.mlp(self.ln2(x))  # BUG: the residual path carries no gradient
        else:
            x = x + self.mlp(self.ln2(x))
        return self.mix(x)


class TinyTransformer(nn.Module):
    """Two blocks over float inputs."""

    def __init__(self, d: int = 8, **bug: object) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([Block(d), Block(d, **bug)])  # type: ignore[arg-type]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x


class ConvBlock(nn.Module):
    """conv, BatchNorm, ReLU; `hook` plants a tensor hook that doubles the gradient."""

    def __init__(self, c_in: int, c_out: int, hook: bool = False) -> None:
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, 3, padding=1)
        self.bn = nn.BatchNorm2d(c_out)
        self.hook = hook

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.bn(self.conv(x))
        if self.hook and h.requires_grad:
            h.register_hook(lambda g: g * 2)  # BUG: scales the gradient
        return F.relu(h)


class ConvNet(nn.Module):
    """Two conv blocks, max-pool, dropout and a classifier."""

    def __init__(self, hook: bool = False) -> None:
        super().__init__()
        self.features = nn.Sequential(ConvBlock(2, 4), nn.MaxPool2d(2), ConvBlock(4, 4, hook))
        self.drop = nn.Dropout(0.2)
        self.head = nn.Linear(4 * 4 * 4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.drop(self.features(x).flatten(1)))


class Gate(nn.Module):
    """A sigmoid gate; `corrupt` changes the saved sigmoid output in place after the op saved it."""

    def __init__(self, d: int, corrupt: bool = False) -> None:
        super().__init__()
        self.lin = nn.Linear(d, d)
        self.corrupt = corrupt

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = torch.sigmoid(self.lin(x))
        out = s * x
        if self.corrupt:
            s.data.mul_(0.5)  # BUG: sigmoid's backward reads the changed output
        return out


class Tagger(nn.Module):
    """An LSTM tagger: embedding, LSTM, a gate, per-token scores."""

    def __init__(self, vocab: int = 11, d: int = 6, tags: int = 3, corrupt: bool = False) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.lstm = nn.LSTM(d, d, batch_first=True)
        self.gate = Gate(d, corrupt)
        self.out = nn.Linear(d, tags)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h, _ = self.lstm(self.emb(tokens))
        return self.out(self.gate(h)).log_softmax(-1)


class TiedLM(nn.Module):
    """Embedding, one block, an output layer tied to the embedding."""

    def __init__(self, vocab: int = 13, d: int = 8, **bug: object) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.block = Block(d, **bug)  # type: ignore[arg-type]
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.block(self.emb(tokens)))


class IntegerOnly(nn.Module):
    """One-hot codes of integer tokens: nothing to differentiate."""

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return F.one_hot(tokens, 13).to(torch.float32)


class Unseeded(nn.Module):
    """Noise from Python's generator, which no one seeds between evaluations."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.lin = nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x) + random.random()


class ExpWrongJvp(torch.autograd.Function):
    """exp with a right backward and a forward-mode derivative 1.5 x too large."""

    @staticmethod
    def forward(ctx, x):  # type: ignore[no-untyped-def]
        y = x.exp()
        ctx.save_for_backward(y)
        ctx.save_for_forward(y)
        return y

    @staticmethod
    def backward(ctx, g):  # type: ignore[no-untyped-def]
        (y,) = ctx.saved_tensors
        return g * y

    @staticmethod
    def jvp(ctx, t):  # type: ignore[no-untyped-def]
        (y,) = ctx.saved_tensors
        return 1.5 * t * y


class ExpFlatSecond(torch.autograd.Function):
    """exp whose backward is right in value but constant to a second differentiation."""

    @staticmethod
    def forward(ctx, x):  # type: ignore[no-untyped-def]
        ctx.save_for_backward(x)
        return x.exp()

    @staticmethod
    def backward(ctx, g):  # type: ignore[no-untyped-def]
        (x,) = ctx.saved_tensors
        return g * x.detach().exp()


class Through(nn.Module):
    """A linear layer, then a planted Function."""

    def __init__(self, d: int, fn: type[torch.autograd.Function]) -> None:
        super().__init__()
        self.lin = nn.Linear(d, d)
        self.fn = fn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn.apply(self.lin(x) * 0.3)


class Twice(nn.Module):
    """One linear layer called twice, so each call is checked at its own inputs."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.lin = nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(torch.tanh(self.lin(x)))


class ScaledIdentity(torch.autograd.Function):
    """The identity whose backward is 1.02 x the incoming gradient."""

    @staticmethod
    def forward(ctx, x):  # type: ignore[no-untyped-def]
        return x.clone()

    @staticmethod
    def backward(ctx, g):  # type: ignore[no-untyped-def]
        return 1.02 * g
