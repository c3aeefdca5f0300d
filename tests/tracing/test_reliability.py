"""Tracer and summary honesty: node limits, odd outputs, in-place saved tensors, memory."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
import torch
from torch import nn

from graphviz_app import render, trace
from graphviz_app.model import NodeKind

ROOT = Path(__file__).resolve().parents[2]


def test_max_nodes_counts_output_and_saved_nodes_too() -> None:
    """Before: `[y] * 999` with max_nodes=1000 gave 1,002 nodes."""
    x = torch.arange(3.0, requires_grad=True)
    y = (x * x).sum()
    graph = trace([y] * 999, max_nodes=1000)
    assert len(graph.nodes) == 1000 and graph.truncated
    saved_cut = trace((x * x).sum(), max_nodes=3)  # output, SumBackward0, MulBackward0: no room for saved
    assert len(saved_cut.nodes) == 3 and saved_cut.truncated


def test_outputs_past_max_nodes_are_named_in_a_note() -> None:
    x = torch.arange(3.0, requires_grad=True)
    graph = trace([x.sum(), x.exp().sum(), x.sin().sum()], max_nodes=1)
    assert len(graph.nodes) == 1
    assert "2 output(s) from output[1] on are not shown" in graph.notes


@pytest.mark.slow  # a process of its own, which loads torch
def test_an_output_list_that_contains_itself_is_traced_once() -> None:
    """Before: trace() never returned. Run in a subprocess so a regression fails, not hangs."""
    script = textwrap.dedent(
        """
        import torch
        from graphviz_app import trace
        x = torch.arange(3.0, requires_grad=True)
        outputs = [(x * 2).sum()]
        outputs.append(outputs)
        graph = trace(outputs)
        print(len(graph.nodes))
        print(graph.notes[0])
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr[-2000:]
    count, note = done.stdout.splitlines()
    assert int(count) < 10
    assert note == "output[1] is the same list as output: its tensors are traced once, under that name"


def test_a_list_shared_many_times_is_opened_once() -> None:
    x = torch.arange(3.0, requires_grad=True)
    inner = [(x * 2).sum()] * 100
    graph = trace([inner] * 100)
    assert len(graph.of_kind(NodeKind.OUTPUT)) == 100
    assert sum("is the same list as output[0]" in n for n in graph.notes) == 99


def test_a_nested_tensor_traces_with_its_padded_shape() -> None:
    """Before: RuntimeError "NestedTensorImpl doesn't support sizes" from trace()."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch: nested tensors are a prototype
        nt = torch.nested.nested_tensor([torch.ones(2, 4), torch.ones(3, 4)], requires_grad=True)
    graph = trace((nt * 2).sin())
    out = graph.nodes[0]
    assert out.tensor.shape == (2, 3, 4) and out.tensor.numel == 20
    assert "output is a nested tensor: its shape is shown padded to its largest part" in graph.notes
    assert "SinBackward0" in render(graph).source


def test_a_saved_tensor_modified_in_place_is_not_called_freed() -> None:
    """Before: "1 saved tensor(s) were already freed by backward()" and "(freed by backward)"."""
    x = torch.ones(3, requires_grad=True)
    a = x * 2
    b = a.sin()  # saves a
    a.mul_(3)
    graph = trace(b)
    assert len(graph.notes) == 1
    assert graph.notes[0].startswith("1 saved tensor(s) were modified in place after the op saved them")
    assert "freed" not in graph.notes[0]
    source = render(graph).source
    assert "(modified in place)" in source and "freed by backward" not in source


def test_a_custom_function_saved_tensor_modified_in_place() -> None:
    class Double(torch.autograd.Function):
        @staticmethod
        def forward(ctx, t):  # type: ignore[no-untyped-def]
            ctx.save_for_backward(t)
            return t * 2

        @staticmethod
        def backward(ctx, g):  # type: ignore[no-untyped-def]
            return g * 2

    x = torch.ones(3, requires_grad=True)
    a = x * 1
    out = Double.apply(a)
    a.add_(1)
    graph = trace(out)
    assert "modified in place" in graph.notes[0]


def test_summary_keeps_a_linear_layers_weights_out_of_activations() -> None:
    """Before: weights saved by Linear were counted as "saved tensors"."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 64))
    x = torch.randn(8, 64)
    summary = trace(model(x).sum(), dict(model.named_parameters())).summary()
    param_bytes = sum(p.numel() * 4 for p in model.parameters())
    assert summary.params_total == param_bytes
    # input x (saved by the first Linear), relu's result and the second Linear's input
    assert summary.activations_total == 8 * 64 * 4 * 2
    assert summary.activation_bytes == (("cpu", 8 * 64 * 4 * 2),)
    assert "activations held 4.0 KiB, parameters referenced 32.5 KiB" in str(summary)


def test_summary_says_not_traced_when_saved_tensors_were_hidden() -> None:
    x = torch.arange(3.0, requires_grad=True)
    graph = trace(x.exp().sum(), show_saved=False)
    text = str(graph.summary(saved_traced=False))
    assert "activations held not traced (show_saved=False)" in text and "0 B," not in text
    assert "activations held unknown (no saved tensor traced)" in str(graph.summary())
    assert "activations held 0 B" in str(trace((x + 1).sum()).summary(saved_traced=True))


def test_summary_on_meta_does_not_merge_every_tensor_into_one_storage() -> None:
    w = torch.ones(64, 64, device="meta", requires_grad=True)
    x = torch.ones(8, 64, device="meta", requires_grad=True)
    h = (x @ w).relu()  # mm saves x and w (leaves); relu saves its result
    y = (h * h.exp()).sum()  # mul saves h and exp's result; exp saves its result
    graph = trace(y)
    saved = [n for n in graph.of_kind(NodeKind.SAVED)]
    assert len({n.tensor.storage for n in saved}) == 4  # x, w, h, exp(h); before: 1
    summary = graph.summary()
    assert summary.params_total == (64 * 64 + 8 * 64) * 4
    assert summary.activations_total == 2 * 8 * 64 * 4  # h (relu and mul save it) and exp(h)
    assert summary.devices == ("meta",)


def test_summary_splits_memory_per_device() -> None:
    x = torch.ones(4, dtype=torch.float64, requires_grad=True)
    m = torch.ones(4, device="meta", requires_grad=True)
    graph = trace((x.exp().sum(), m.exp().sum()))
    summary = graph.summary()
    assert summary.activation_bytes == (("cpu", 32), ("meta", 16))
    assert "activations held 32 B on cpu + 16 B on meta" in str(summary)


def test_graph_repr_is_short_and_says_how_to_see_more() -> None:
    """Before: the dataclass repr, 110,129 characters for ResNet-18."""
    torch.manual_seed(0)
    blocks = [nn.Sequential(nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU()) for _ in range(12)]
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), *blocks, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10)
    )
    graph = trace(model(torch.randn(2, 3, 16, 16)), dict(model.named_parameters()))
    text = repr(graph)
    assert len(graph.nodes) > 100 and len(text) < 300 and "\n" not in text
    assert text.startswith(f"<Graph: {len(graph.nodes)} nodes (")
    assert ".summary()" in text and "save(graph" in text
