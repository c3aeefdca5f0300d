"""Graphs whose traced JSON must never change when the tracer is only made faster.

Beyond the core corpus and the golden graphs: a ResNet-style model, a GPT-style
transformer block, and small graphs for the tracer's corner cases (freed saved
tensors, non-finite and complex values, integer saved tensors, negative dims,
a meta-device copy, views). Everything is seeded, so each builder makes the
same graph on every run.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from core_corpus import CORPUS, Case
from core_golden import golden_graphs
from torch import nn

__all__ = ["IDENTITY_CASES", "OPTION_SETS", "ResidualBlock", "resnet", "gpt_block"]


class ResidualBlock(nn.Module):
    """conv-bn-relu-conv-bn plus a (projected, when strided) shortcut, then relu."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.short: nn.Module = nn.Identity()
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(h)) + self.short(x))


def resnet(blocks_per_stage: int = 2, width: int = 4, size: int = 8) -> Case:
    """A ResNet-style classifier: stem, four stages of residual blocks, pool, linear."""
    torch.manual_seed(0)
    layers: list[nn.Module] = [nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU()]
    cin = width
    for stage in range(4):
        cout = width * 2**stage
        for b in range(blocks_per_stage):
            layers.append(ResidualBlock(cin, cout, 2 if b == 0 and stage > 0 else 1))
            cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, 10)]
    model = nn.Sequential(*layers)
    out = nn.functional.cross_entropy(model(torch.randn(2, 3, size, size)), torch.tensor([1, 7]))
    return Case(out, dict(model.named_parameters()), [model])


class GPTBlock(nn.Module):
    """Pre-norm causal self-attention and a GELU MLP, written out op by op."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        att = att.masked_fill(torch.ones(t, t).triu(1).bool(), float("-inf")).softmax(dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.out(nn.functional.gelu(self.fc(self.ln2(x))))


def gpt_block(layers: int = 2, d: int = 8, heads: int = 2, vocab: int = 11) -> Case:
    """Token embedding, `layers` GPT blocks, a final norm and a tied-free head."""
    torch.manual_seed(0)
    emb, head = nn.Embedding(vocab, d), nn.Linear(d, vocab)
    blocks = nn.Sequential(*(GPTBlock(d, heads) for _ in range(layers)))
    norm = nn.LayerNorm(d)
    model = nn.ModuleDict({"emb": emb, "blocks": blocks, "norm": norm, "head": head})
    tokens = torch.tensor([[1, 2, 3, 4], [5, 6, 7, 8]])
    logits = head(norm(blocks(emb(tokens))))
    loss = nn.functional.cross_entropy(logits.view(-1, vocab), tokens.roll(-1, 1).reshape(-1))
    return Case(loss, dict(model.named_parameters()), [model])


def after_backward() -> Case:
    """Saved tensors already released by backward(): the graph shows them freed."""
    x = torch.arange(1.0, 4.0, requires_grad=True)
    y = (x.exp() * x).sum()
    y.backward()
    return Case(y, {"x": x})


def odd_values() -> Case:
    """nan/inf values, a complex intermediate, integer saved indices, negative dims."""
    x = torch.tensor([1.0, float("inf"), -2.0, float("nan")], requires_grad=True)
    z = torch.complex(x, x.flip(0)).abs()
    top = torch.stack([x, z]).max(dim=-1).values.sum(-1)
    gathered = x.gather(0, torch.tensor([2, 0]))
    return Case((top, gathered.cumsum(-1), x.unsqueeze(-1).expand(4, 3)), {"x": x})


def meta_copy() -> Case:
    """A cpu -> meta copy: a tensor without values or storage address."""
    x = torch.arange(3.0, requires_grad=True)
    return Case((x * 2).to("meta").sum(), {"x": x})


def shared_views() -> Case:
    """Two outputs viewing one base, an in-place op on a slice, a double-width dtype."""
    x = torch.arange(6.0, dtype=torch.float64, requires_grad=True)
    base = x * 3
    base[1:3].add_(1.0)
    return Case((base.view(2, 3), base[::2], base.sum()), None)


class LeafLike(torch.autograd.Function):
    """x * 3 whose ctx carries a `variable` tensor, as AccumulateGrad does: drawn as a leaf."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        ctx.variable = x
        return x * 3

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        return grad * 3


def custom_leaf_like() -> Case:
    """A custom Function that looks like a leaf still shows what it saved and its inputs."""
    x = torch.arange(3.0, requires_grad=True)
    return Case(LeafLike.apply(x * 2).sum(), {"x": x})


def _golden(name: str) -> Callable[[], Case]:
    def build() -> Case:
        outputs, params = golden_graphs()[name]()  # type: ignore[operator]
        return Case(outputs, params)

    return build


IDENTITY_CASES: dict[str, Callable[[], Case]] = {
    **CORPUS,
    **{f"golden_{name}": _golden(name) for name in golden_graphs()},
    "resnet": resnet,
    "gpt_block": gpt_block,
    "after_backward": after_backward,
    "odd_values": odd_values,
    "meta_copy": meta_copy,
    "shared_views": shared_views,
    "custom_leaf_like": custom_leaf_like,
}

# Keyword options of trace() each case is traced with.
OPTION_SETS: dict[str, dict[str, Any]] = {
    "default": {},
    "no_saved": {"show_saved": False},
    "no_attrs": {"show_attrs": False},
    "bare": {"show_saved": False, "show_attrs": False},
    "max_nodes_7": {"max_nodes": 7},
}
