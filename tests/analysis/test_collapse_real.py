"""Collapse and roll on real models traced with trace_model."""

from __future__ import annotations

import pytest
import torch

from graphviz_app.analysis.collapse import collapse
from graphviz_app.model import NodeKind
from graphviz_app.tracing.module_trace import trace_model


def _encoder_graph(layers: int):  # noqa: ANN202
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16, dropout=0.0)
    encoder = torch.nn.TransformerEncoder(layer, num_layers=layers, enable_nested_tensor=False)
    return trace_model(encoder, torch.randn(3, 2, 8, requires_grad=True))


# Per layer at depth 2: boxes for self_attn, norm1, linear1, linear2 and norm2 (dropout with
# p=0 makes no op), the layer's own two residual adds and relu, and the relu's saved result.
PER_LAYER = 9


@pytest.mark.parametrize("layers", [6, pytest.param(100, marks=pytest.mark.slow)])
def test_encoder_node_counts_at_depth_2_with_and_without_roll(layers: int) -> None:
    graph = _encoder_graph(layers)
    flat = collapse(graph, depth=2)
    rolled = collapse(graph, depth=2, roll=True)
    assert len(flat.nodes) == 2 + layers * PER_LAYER  # plus the output and the input leaf
    assert [n.kind for n in rolled.nodes] == [NodeKind.OUTPUT, NodeKind.MODULE, NodeKind.LEAF]
    box = rolled.nodes[1]
    assert box.name == f"layers.0–{layers - 1}: TransformerEncoderLayer ×{layers}"
    assert dict(box.attrs)["ops"] == f"{sum(1 for n in graph.nodes if n.kind is NodeKind.OP):,}"


def test_the_summary_of_a_real_model_follows_named_modules() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    rows = list(trace_model(model, torch.ones(2, 3)).module_summary())
    assert [(r.module, r.type, r.params) for r in rows] == [
        ("", "Sequential", 21), ("0", "Linear", 16), ("1", "ReLU", 0), ("2", "Linear", 5),
    ]
    assert rows[0].ops == sum(r.ops for r in rows[1:])  # every op here sits in a child
