"""Gradients on folded views: an edge crossing a module box carries the gradients of the edges it stands for."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from graphviz_app import record, render, trace
from graphviz_app.analysis.collapse import collapse
from graphviz_app.drawing.gradient_style import NONFINITE_COLOR
from graphviz_app.model import EdgeKind, Graph, NodeKind


class TwoHeads(nn.Module):
    """An encoder whose output feeds two heads: two edges leave the encoder box for the same place."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(4, 6), nn.Tanh())
        self.heads = nn.ModuleList([nn.Linear(6, 2), nn.Linear(6, 3)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.encoder(x)
        return torch.cat([head(h) for head in self.heads], dim=-1)


class SqrtOfZero(nn.Module):
    """sqrt(x * 0): an infinite derivative times 0, so the NaN is born inside this module."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sqrt(x * 0.0)


def traced(model: nn.Module, x: torch.Tensor) -> Graph:
    torch.manual_seed(0)
    with record(model):
        out = model(x).sum()
    return trace(out, model, gradients=True)


def test_every_data_edge_crossing_a_box_carries_a_gradient() -> None:
    graph = traced(TwoHeads(), torch.randn(5, 4, requires_grad=True))
    for depth in (0, 1):
        shown = collapse(graph, depth=depth)
        boxes = {n.id for n in shown.nodes if n.kind is NodeKind.MODULE}
        crossing = [e for e in shown.edges if e.kind is EdgeKind.DATA and {e.src, e.dst} & boxes]
        assert crossing and all(e.grad is not None for e in crossing), depth


def test_a_folded_edge_has_the_norm_of_the_gradients_it_stands_for_together() -> None:
    graph = traced(TwoHeads(), torch.randn(5, 4, requires_grad=True))
    shown = collapse(graph, depth=0)
    module_of = {n.id: n.module for n in graph.nodes}
    # Every edge from inside the encoder to inside the heads, as traced.
    parts = [e.grad for e in graph.edges
             if e.kind is EdgeKind.DATA and (module_of.get(e.src) or "").startswith("encoder")
             and (module_of.get(e.dst) or "").startswith("heads")]
    assert len(parts) == 2 and all(g is not None for g in parts)
    folded = next(e for e in shown.edges if e.src == "module/encoder" and e.dst == "module/heads")
    assert folded.grad is not None
    assert folded.grad.norm == pytest.approx(math.sqrt(sum(g.norm ** 2 for g in parts if g)))
    assert folded.grad.numel == sum(g.numel for g in parts if g)
    encoder = next(n for n in shown.nodes if n.id == "module/encoder")
    assert encoder.grad is not None and encoder.grad.norm == pytest.approx(folded.grad.norm)


def test_nan_born_inside_a_box_colours_its_border_edges_red_at_every_depth() -> None:
    model = nn.Sequential(nn.Sequential(nn.Linear(3, 3), SqrtOfZero(), nn.Linear(3, 1)))
    graph = traced(model, torch.randn(2, 3, requires_grad=True))
    assert graph.nonfinite_origin is not None
    for depth, box in ((0, "module/0"), (1, "module/0.1")):
        shown = collapse(graph, depth=depth)
        into = [e for e in shown.edges if e.dst == box and e.kind is EdgeKind.DATA]
        assert len(into) == 1 and into[0].grad is not None and into[0].grad.nan == 6, depth
        dot = render(graph, depth=depth, color_by="gradient").source
        assert f'-> "{box}" [color="{NONFINITE_COLOR}"' in dot, depth
