"""The caller's autocast holds on the big-stack thread: trace_model and measure inside `torch.autocast` trace and
count the autocast step, as the same calls with it asked for explicitly do."""

from __future__ import annotations

import torch

from graphviz_app import trace_model
from graphviz_app.memory import measure
from graphviz_app.model import NodeKind


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


def _op_dtypes(graph: object) -> set[str]:
    return {n.tensor.dtype for n in graph.nodes  # type: ignore[attr-defined]
            if n.kind is NodeKind.OP and n.name == "AddmmBackward0" and n.tensor is not None}


def test_trace_model_inside_autocast_traces_the_autocast_forward() -> None:
    x = torch.randn(8, 16)
    assert _op_dtypes(trace_model(_model(), x)) == {"float32"}
    with torch.autocast("cpu", dtype=torch.bfloat16):
        inside = trace_model(_model(), x)
    assert _op_dtypes(inside) == {"bfloat16"}  # was float32: the forward ran on a thread without the autocast
    assert not torch.is_autocast_enabled("cpu")


def test_measure_inside_autocast_counts_what_measure_with_autocast_counts() -> None:
    x = torch.randn(8, 16)
    asked = measure(_model(), x, autocast=torch.bfloat16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        inside = measure(_model(), x)
    plain = measure(_model(), x)
    assert inside.measured.peak_bytes == asked.measured.peak_bytes != plain.measured.peak_bytes
    assert inside.predicted.peak_bytes == asked.predicted.peak_bytes
