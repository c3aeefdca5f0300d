"""Strings that `str.isdigit()` calls digits but `int()` refuses ("²", "³") never crash a drawing or a diff."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from graphviz_app import diff, trace_model
from graphviz_app.analysis.collapse import collapse
from graphviz_app.drawing.renderer import export
from graphviz_app.drawing.style import device_color


@pytest.mark.parametrize("device", ["cuda:²", "cuda:¹²", "cuda:٣"])
def test_a_device_index_of_unicode_digits_gets_a_colour(device: str) -> None:
    assert device_color(device) == device_color("cuda")  # an index int() cannot read: the first GPU colour


def _model(names: list[str]) -> nn.Module:
    model = nn.Sequential()
    for name in names:
        model.add_module(name, nn.Linear(2, 2))
    return model


def test_modules_named_by_unicode_digits_roll_and_diff() -> None:
    torch.manual_seed(0)
    graph = trace_model(_model(["²", "³", "⁴"]), torch.randn(1, 2))
    rolled = collapse(graph, depth=1, roll=True)
    assert any(": Linear ×" in n.name for n in rolled.nodes)  # a run of repeats, titled without int("²")
    other = trace_model(_model(["²", "³"]), torch.randn(1, 2))
    found = diff(graph, other)
    assert not found.empty and "⁴" in str(found)
    assert export(rolled, "dot").startswith(b"digraph")
