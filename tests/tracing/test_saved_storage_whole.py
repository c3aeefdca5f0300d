"""Activation memory counts every saved storage whole and once, as a saved-tensor hook sees it, to the byte.

The oracle is torch's own `saved_tensors_hooks`: every tensor autograd saves
passes through `pack`, which notes its whole untyped storage (a view such as q
split from one qkv projection keeps all of it alive) and the modules whose
forward is running. Parameters are weights, not activations, and are left out
on both sides.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import pytest
import torch
from torch import nn

from graphviz_app import record, trace
from graphviz_app.analysis.collapse import collapse
from graphviz_app.analysis.module_tree import ancestors
from graphviz_app.model import Graph, NodeKind, human_bytes


class SplitQKV(nn.Module):
    """One qkv projection chunked into q, k, v (GPT-2's c_attn), then attention."""

    def __init__(self, d: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.heads = heads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (t.reshape(b, n, self.heads, -1).transpose(1, 2) for t in (q, k, v))
        # A 0-dim tensor, as transformers' GPT-2 divides: torch's pack hook skips Python numbers
        # wrapped as tensors (8 bytes each), which the graph does count.
        scale = torch.full([], (d // self.heads) ** 0.5)
        att = (q @ k.transpose(-2, -1) / scale).softmax(-1)
        return self.proj((att @ v).transpose(1, 2).reshape(b, n, d))


class VitAttention(nn.Module):
    """timm's ViT attention: qkv reshaped to (3, B, H, N, D) and unbound."""

    def __init__(self, d: int = 16, heads: int = 4) -> None:
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.norm = nn.LayerNorm(d)
        self.heads = heads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        qkv = self.qkv(self.norm(x)).reshape(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)  # views of one storage, all three saved by the attention
        out = nn.functional.scaled_dot_product_attention(q, k, v)
        return x + self.proj(out.transpose(1, 2).reshape(b, n, d))


class GatedExperts(nn.Module):
    """Mixtral-like experts: one gate_up projection chunked into gate and up halves."""

    def __init__(self, d: int = 16, hidden: int = 32, experts: int = 2) -> None:
        super().__init__()
        self.router = nn.Linear(d, experts)
        self.gate_up = nn.ModuleList(nn.Linear(d, 2 * hidden) for _ in range(experts))
        self.down = nn.ModuleList(nn.Linear(hidden, d) for _ in range(experts))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weights = self.router(x).softmax(-1)
        out = torch.zeros_like(x)
        for i, (gate_up, down) in enumerate(zip(self.gate_up, self.down, strict=True)):
            gate, up = gate_up(x).chunk(2, dim=-1)
            out = out + weights[..., i : i + 1] * down(nn.functional.silu(gate) * up)
        return out


class GruTagger(nn.Module):
    """Embedding -> GRU -> Linear: the GRU's gates are chunked from one matmul per step on CPU."""

    def __init__(self) -> None:
        super().__init__()
        self.embedding = nn.Embedding(50, 8)
        self.gru = nn.GRU(8, 12, batch_first=True)
        self.linear = nn.Linear(12, 4)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h, last = self.gru(self.embedding(x))
        return self.linear(h), last


class LstmStack(nn.Module):
    """A 2-layer LSTM returning every output, so nothing it saved is left out of the graph."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(6, 10, num_layers=2, batch_first=True)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out, (h, c) = self.lstm(x)
        return out, h, c


@dataclass(frozen=True)
class Case:
    name: str
    build: Callable[[], nn.Module]
    inputs: Callable[[], tuple[torch.Tensor, ...]]


CASES = [
    Case("split_qkv", SplitQKV, lambda: (torch.randn(2, 5, 16, requires_grad=True),)),
    Case("vit_attention", VitAttention, lambda: (torch.randn(2, 7, 16),)),
    Case("gated_experts", GatedExperts, lambda: (torch.randn(3, 16),)),
    Case("gru_tagger", GruTagger, lambda: (torch.randint(0, 50, (2, 6)),)),
    Case("lstm", LstmStack, lambda: (torch.randn(2, 5, 6),)),
    Case("gru", lambda: nn.Sequential(nn.GRU(6, 10, num_layers=2)), lambda: (torch.randn(5, 2, 6),)),
]


@dataclass
class HookCount:
    """What `pack` saw: storage -> bytes, over all and per running module (parents included).

    `leaves` are the storages of parameters and of inputs that require grad:
    memory that exists anyway, left out as the graph's figures leave it out.
    """

    leaves: set[int]
    total: dict[tuple[str, int], int] = field(default_factory=dict)
    modules: dict[str, dict[tuple[str, int], int]] = field(default_factory=dict)
    running: list[str] = field(default_factory=list)

    def pack(self, t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        key = (str(t.device), storage.data_ptr())
        if key[1] not in self.leaves and storage.nbytes():
            self.total[key] = storage.nbytes()
            for name in {a for running in self.running for a in ancestors(running)}:
                self.modules.setdefault(name, {})[key] = storage.nbytes()
        return t  # the graph keeps it alive anyway, so no storage is reused while counting


@contextmanager
def counting(model: nn.Module, inputs: tuple[torch.Tensor, ...]) -> Iterator[HookCount]:
    leaves = [*model.parameters(), *(x for x in inputs if x.requires_grad)]
    count = HookCount(leaves={t.untyped_storage().data_ptr() for t in leaves})
    names = {id(m): n for n, m in model.named_modules()}

    def enter(module: nn.Module, args: object) -> None:
        if id(module) in names:
            count.running.append(names[id(module)])

    def leave(module: nn.Module, args: object, output: object) -> None:
        if id(module) in names:
            count.running.pop()

    handles = [nn.modules.module.register_module_forward_pre_hook(enter),
               nn.modules.module.register_module_forward_hook(leave)]
    try:
        with torch.autograd.graph.saved_tensors_hooks(count.pack, lambda t: t):
            yield count
    finally:
        for h in handles:
            h.remove()


def traced(case: Case) -> tuple[Graph, HookCount, nn.Module]:
    """The graph of one forward, and what a saved-tensor hook counted on the same forward run again.

    The tracer does not unpack tensors a saved-tensor hook packed (unpacking runs the hook; for
    checkpointing it recomputes), so the hook counts a second, identical forward.
    """
    torch.manual_seed(0)
    model = case.build()
    inputs = case.inputs()
    with counting(model, inputs) as count:
        model(*inputs)
    with record(model):
        out = model(*inputs)
    return trace(out, model), count, model


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_summary_counts_what_the_saved_tensor_hook_sees(case: Case) -> None:
    graph, count, _ = traced(case)
    held = dict(graph.summary().activation_bytes)
    assert held == {"cpu": sum(count.total.values())}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_module_summary_counts_what_the_hook_sees_in_each_module(case: Case) -> None:
    graph, count, _ = traced(case)
    rows = {r.module: r.activation_bytes for r in graph.module_summary()}
    expected = {name: sum(seen.values()) for name, seen in count.modules.items()}
    assert {name: rows[name] for name in expected} == expected


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_module_boxes_count_what_the_hook_sees(case: Case) -> None:
    graph, count, _ = traced(case)
    boxes = {n.module: dict(n.attrs)["activations"] for n in collapse(graph, depth=0).nodes
             if n.kind is NodeKind.MODULE}
    assert boxes, "the model has children drawn as boxes"
    assert boxes == {name: human_bytes(sum(count.modules.get(name, {}).values())) for name in boxes}


def test_a_view_of_a_bigger_storage_counts_the_whole_storage_once() -> None:
    graph, count, _ = traced(CASES[1])
    saved = [n.tensor for n in graph.nodes if n.kind is NodeKind.SAVED and n.tensor is not None]
    views = [t for t in saved if t.storage_bytes is not None and t.storage_bytes > t.bytes]
    assert views, "q, k and v are views of the qkv projection's output, saved by the attention"
    assert dict(graph.summary().activation_bytes)["cpu"] >= sum({t.storage: t.storage_bytes for t in views}.values())
