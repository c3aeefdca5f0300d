"""trace() with an nn.Module as params, Graph.modules, and trace_model()."""

from __future__ import annotations

import weakref

import pytest
import torch
from torch import nn

from graphviz_app import record, trace, trace_model
from graphviz_app.errors import NoGradFnError, TraceError
from graphviz_app.model import ModuleInfo, NodeKind


class _Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)
        self.norm = nn.LayerNorm(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(torch.relu(self.linear(x)) + x)


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(7, 4)
        self.layers = nn.ModuleList([_Block(), _Block()])
        self.unused = nn.Linear(4, 4)  # never called: not "seen"

    def forward(self, ids: torch.Tensor, *, scale: float = 1.0) -> torch.Tensor:
        h = self.embed(ids)
        for layer in self.layers:
            h = layer(h)
        return nn.functional.linear(h, self.embed.weight) * scale  # tied to the embedding


def test_module_as_params_names_leaves_and_puts_them_in_their_module() -> None:
    model = _Net()
    with record(model):
        out = model(torch.tensor([1, 2, 3])).sum()
    leaves = {n.name: n.module for n in trace(out, model).of_kind(NodeKind.LEAF)}
    assert leaves["layers.0.linear.weight"] == "layers.0.linear"
    assert leaves["layers.1.norm.bias"] == "layers.1.norm"
    assert leaves["embed.weight"] == "embed"  # the tied head uses the embedding's weight
    assert len(leaves) == 1 + 2 * 4


def test_graph_modules_lists_modules_seen_in_named_modules_order() -> None:
    model = _Net()
    with record(model):
        out = model(torch.tensor([1, 2, 3])).sum()
    modules = trace(out, model).modules
    block = ModuleInfo("", "_Block", 4 * 4 + 4 + 4 + 4, (4 * 4 + 4 + 4 + 4) * 4)
    assert [m.name for m in modules] == [
        "", "embed", "layers", "layers.0", "layers.0.linear", "layers.0.norm",
        "layers.1", "layers.1.linear", "layers.1.norm",
    ]  # fmt: skip
    by_name = {m.name: m for m in modules}
    assert by_name["layers.0"] == ModuleInfo("layers.0", "_Block", block.params, block.param_bytes)
    assert by_name["layers"].type == "ModuleList"
    assert by_name["layers"].params == 2 * block.params
    # Parameters counted once each, the tied one included; the unused module's too.
    assert by_name[""].params == sum(p.numel() for p in model.parameters())
    assert by_name[""].param_bytes == by_name[""].params * 4


def test_params_as_named_parameters_still_leaves_modules_unknown() -> None:
    model = nn.Linear(2, 2)
    out = model(torch.randn(1, 2)).sum()
    graph = trace(out, model.named_parameters())
    assert {n.name: n.module for n in graph.of_kind(NodeKind.LEAF)} == {"weight": None, "bias": None}
    assert graph.modules == ()


def test_module_without_record_gives_leaf_owners_only() -> None:
    model = nn.Sequential(nn.Linear(2, 2), nn.Tanh())
    graph = trace(model(torch.randn(1, 2)).sum(), model)
    assert {n.module for n in graph.of_kind(NodeKind.OP)} == {None}
    assert [(m.name, m.type) for m in graph.modules] == [("", "Sequential"), ("0", "Linear")]


def test_trace_model_equals_record_then_trace() -> None:
    torch.manual_seed(0)
    model = _Net()
    ids = torch.tensor([1, 2, 3])
    with record(model):
        out = model(ids, scale=2.0)
    by_hand = trace(out, model)
    graph = trace_model(model, ids, scale=2.0)
    assert [(n.kind, n.name, n.module) for n in graph.nodes] == [
        (n.kind, n.name, n.module) for n in by_hand.nodes
    ]
    assert graph.modules == by_hand.modules
    mul = next(n for n in graph.nodes if n.name == "MulBackward0")
    assert mul.tensor is not None and mul.tensor.shape == (3, 7)
    # the file is named from the working directory or a sys.path folder: tests/tracing/... from the repo root
    assert mul.source is not None
    assert mul.source.partition(":")[0].endswith(f"{__name__.rpartition('.')[2]}.py"), mul.source


def test_trace_model_forwards_trace_options() -> None:
    model = nn.Sequential(nn.Linear(3, 3), nn.Tanh(), nn.Linear(3, 1))
    x = torch.randn(2, 3)
    assert not trace_model(model, x, show_saved=False).of_kind(NodeKind.SAVED)
    small = trace_model(model, x, max_nodes=3)
    assert small.truncated  # max_nodes counts every node: the output and two ops here
    assert len(small.nodes) == 3 and len(small.of_kind(NodeKind.OUTPUT)) == 1


def test_trace_model_runs_with_grad_even_under_no_grad() -> None:
    model = nn.Linear(2, 1)
    with torch.no_grad():
        graph = trace_model(model, torch.randn(1, 2))
    assert [n.name for n in graph.of_kind(NodeKind.OP)] == ["AddmmBackward0", "TBackward0"]


def test_trace_model_refuses_what_is_not_a_module() -> None:
    with pytest.raises(TraceError, match=r"trace_model\(\) expects an nn.Module first, got a Tensor"):
        trace_model(torch.ones(2), torch.ones(2))  # type: ignore[arg-type]


def test_trace_model_says_why_there_is_no_graph() -> None:
    model = nn.Linear(2, 1).requires_grad_(False)
    with pytest.raises(NoGradFnError, match="does not require grad"):
        trace_model(model, torch.randn(1, 2))


class _Deep(nn.Module):
    def __init__(self, ops: int) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(1))
        self.ops = ops

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x * self.scale
        for _ in range(self.ops):
            h = h + 1
        return h


@pytest.mark.slow
def test_trace_model_survives_a_graph_too_deep_for_the_default_stack() -> None:
    # Freed on a default stack, a chain this long walked from Python crashes the process.
    graph = trace_model(_Deep(150_000), torch.ones(1), show_saved=False, show_attrs=False)
    ops = graph.of_kind(NodeKind.OP)
    assert len(ops) == 150_001
    assert {n.module for n in ops} == {""}


def test_a_tied_weight_counts_in_each_module_holding_it_and_once_in_their_parent() -> None:
    class LM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(10, 4)
            self.decoder = nn.Linear(4, 10, bias=False)
            self.decoder.weight = self.embed.weight

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            return self.decoder(self.embed(ids))

    graph = trace_model(LM(), torch.tensor([1, 2]))
    params = {m.name: (m.params, m.param_bytes) for m in graph.modules}
    assert params == {"": (40, 160), "embed": (40, 160), "decoder": (40, 160)}


def test_trace_model_passes_a_forward_error_on_without_keeping_its_tensors() -> None:
    made: list[weakref.ref[torch.Tensor]] = []

    class Fails(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(2, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.fc(x)
            made.append(weakref.ref(h))
            raise ValueError("shape mismatch in the user's forward")

    with pytest.raises(ValueError, match="shape mismatch in the user's forward") as caught:
        trace_model(Fails(), torch.randn(1, 2))
    assert caught.value is not None  # the error is still alive here...
    assert made[0]() is None  # ...but the graph it interrupted was freed on the big-stack thread


def test_trace_model_with_gradients_puts_module_and_gradient_on_each_op() -> None:
    import torch
    from torch import nn

    from graphviz_app import trace_model

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    graph = trace_model(model, torch.randn(2, 3), gradients=True)
    ops = [n for n in graph.nodes if n.kind.value == "op"]
    assert ops and all(n.grad is not None for n in ops)
    assert {n.module for n in ops} >= {"0", "1", "2"}
    weight = next(n for n in graph.nodes if n.name == "0.weight")
    assert weight.module == "0" and weight.grad is not None and weight.grad.numel == 12
