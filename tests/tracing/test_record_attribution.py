"""record(): every backward node's module equals the one autograd sequence numbers give."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
import torch
from custom_functions import Doubled
from torch import nn
from torch.utils.checkpoint import checkpoint

from graphviz_app import record, trace
from graphviz_app.model import NodeKind

Pairs = Counter[tuple[str | None, str]]


def _sequence_nr_now() -> int:
    # Independent of the recorder: a probe node's number; later nodes have larger ones.
    with torch.enable_grad():
        return (torch.zeros((), requires_grad=True) * 1).grad_fn._sequence_nr()


class _Intervals:
    """Module pre/post hooks noting the sequence numbers each forward call spans."""

    def __init__(self, model: nn.Module) -> None:
        self.spans: list[tuple[int, int, str]] = []
        self._open: list[int] = []
        self._handles = []
        for name, module in model.named_modules():
            self._handles.append(module.register_forward_pre_hook(self._pre))
            self._handles.append(module.register_forward_hook(self._post_for(name)))

    def _pre(self, module: nn.Module, args: Any) -> None:
        self._open.append(_sequence_nr_now())

    def _post_for(self, name: str) -> Callable[..., None]:
        def post(module: nn.Module, args: Any, output: Any) -> None:
            self.spans.append((self._open.pop(), _sequence_nr_now(), name))

        return post

    def module_of(self, seq: int) -> str | None:
        inside = [(start, name) for start, end, name in self.spans if start < seq < end]
        return max(inside)[1] if inside else None  # the innermost call started last

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()


def _reference(outputs: Any, intervals: _Intervals) -> Pairs:
    """(module, op name) of every node behind `outputs`, from sequence numbers alone."""
    roots = [outputs] if isinstance(outputs, torch.Tensor) else list(outputs)
    todo = [t.grad_fn for t in roots if t.grad_fn is not None]
    seen: set[int] = set()
    pairs: Pairs = Counter()
    while todo:
        fn = todo.pop()
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        todo.extend(child for child, _ in fn.next_functions if child is not None)
        if type(fn).__name__ != "AccumulateGrad":
            pairs[(intervals.module_of(fn._sequence_nr()), type(fn).__name__)] += 1
    return pairs


def _recorded(outputs: Any, model: nn.Module) -> Pairs:
    graph = trace(outputs, model)
    return Counter((n.module, n.name) for n in graph.of_kind(NodeKind.OP))


class _MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 8), nn.GELU())
        self.head = nn.ModuleDict({"out": nn.Linear(8, 3)})

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.body(x)
        return torch.tanh(self.head["out"](h)).sum()  # functional code in forward


class _CNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2)
        )
        self.classifier = nn.Linear(4 * 4 * 4, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.features(x), 1)).logsumexp(-1).mean()


class _Tied(nn.Module):
    """A language-model head sharing the embedding's weight, and a block called twice."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(10, 6)
        self.block = nn.Linear(6, 6)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.block(self.block(self.embed(ids)))
        return nn.functional.linear(h, self.embed.weight).sum()


class _Checkpointed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 4))
        self.last = nn.Linear(4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = checkpoint(self.inner, x, use_reentrant=False)
        return self.last(h).sum()


class _PreComputed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (self.lin(x) * x).sum()


class _Untracked(nn.Module):
    """Nodes no torch call returns, made in the root and first met inside a child."""

    def __init__(self) -> None:
        super().__init__()
        self.child = nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        doubled = Doubled.apply(x)  # autograd.Function.apply is no torch function call
        patched = torch.zeros(2, 3)
        patched[0] = x[1]  # x[i] = v returns None; its CopySlices node is met through x
        return (self.child(doubled) + self.child(patched)).sum()


def _encoder() -> nn.Module:
    layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.1, batch_first=True)
    return nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)


def _lstm_input() -> torch.Tensor:
    return torch.randn(5, 2, 4)


CASES: dict[str, tuple[Callable[[], nn.Module], Callable[[], Any]]] = {
    "mlp in Sequential and ModuleDict": (_MLP, lambda: torch.randn(4, 6)),
    "cnn with batchnorm": (_CNN, lambda: torch.randn(2, 3, 8, 8)),
    "transformer encoder": (_encoder, lambda: torch.randn(2, 5, 16)),
    "lstm": (lambda: nn.LSTM(4, 6, num_layers=2), _lstm_input),
    "weight tying, module called twice": (_Tied, lambda: torch.tensor([[1, 2, 3], [4, 5, 6]])),
    "checkpoint (non-reentrant)": (_Checkpointed, lambda: torch.randn(3, 4, requires_grad=True)),
    "custom Function and setitem in the root": (_Untracked, lambda: torch.randn(2, 3, requires_grad=True)),
}


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_modules_match_sequence_number_reference(case: str) -> None:
    torch.manual_seed(0)
    make_model, make_input = CASES[case]
    model, x = make_model(), make_input()
    intervals = _Intervals(model)
    try:
        with record(model):
            out = model(x)
    finally:
        intervals.remove()
    outputs = (out[0], *out[1]) if case == "lstm" else out
    expected = _reference(outputs, intervals)
    assert {module for module, _ in expected} - {None}  # the reference saw modules
    assert _recorded(outputs, model) == expected


def test_every_op_inside_a_model_is_attributed() -> None:
    model = _encoder()
    with record(model):
        out = model(torch.randn(2, 5, 16)).sum()
    ops = trace(out, model).of_kind(NodeKind.OP)
    # Multi-head attention makes dozens of nodes inside one torch call.
    attention = [n for n in ops if n.module == "layers.0.self_attn"]
    assert len(attention) > 20
    assert [n.name for n in ops if n.module is None] == ["SumBackward0"]


def test_tensor_computed_before_record_is_never_claimed() -> None:
    model = _PreComputed()
    w = torch.randn(2, 3, requires_grad=True)
    x = (w * 2).exp()  # before record(): MulBackward0 and ExpBackward0 belong to no module
    intervals = _Intervals(model)
    with record(model):
        out = model(x)
    intervals.remove()
    recorded = _recorded(out, model)
    assert recorded == _reference(out, intervals)
    assert recorded[(None, "MulBackward0")] == 1 and recorded[(None, "ExpBackward0")] == 1
    assert recorded[("", "MulBackward0")] == 1  # the one the root's forward made


def test_without_model_names_are_class_names() -> None:
    model = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    with record():
        out = model(torch.randn(1, 2)).sum()
    graph = trace(out)
    assert {(n.name, n.module) for n in graph.of_kind(NodeKind.OP)} == {
        ("SumBackward0", None),
        ("ReluBackward0", "ReLU"),
        ("AddmmBackward0", "Linear"),
        ("TBackward0", "Linear"),
    }
    assert [(m.name, m.type) for m in graph.modules] == [("ReLU", "ReLU"), ("Linear", "Linear")]


def test_custom_function_inside_a_module_belongs_to_it() -> None:
    class UsesDouble(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return Doubled.apply(x)  # met only by the module's forward hook

    model = nn.Sequential(UsesDouble(), nn.Tanh())
    with record(model):
        out = model(torch.randn(3, requires_grad=True)).sum()
    modules = {n.name: n.module for n in trace(out, model).of_kind(NodeKind.OP)}
    assert modules == {"SumBackward0": None, "TanhBackward0": "1", "DoubledBackward": "0"}
