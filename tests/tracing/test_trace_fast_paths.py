"""The tracer's shortcuts (shared attribute text, chunked JSON) give what the plain path gives."""

from __future__ import annotations

import json

import pytest
import torch

from graphviz_app import trace
from graphviz_app.model import Graph, ModuleInfo, NodeKind


def _attrs_by_op(graph: Graph) -> list[tuple[str, dict[str, str]]]:
    return [(n.name, dict(n.attrs)) for n in graph.nodes if n.kind is NodeKind.OP]


def test_saved_values_that_compare_equal_keep_their_own_text() -> None:
    # 1 == 1.0 == True and 0.0 == -0.0: ops sharing attribute text must still
    # show the value each one saved.
    x = torch.ones(2, requires_grad=True)
    outputs = (x.add(x, alpha=1), x.add(x, alpha=1.0), x.add(x, alpha=-0.0), x.add(x, alpha=0.0), x.add(x, alpha=1))
    alphas = [attrs["alpha"] for name, attrs in _attrs_by_op(trace(outputs, {"x": x})) if name == "AddBackward0"]
    assert alphas == ["1", "1.0", "-0.0", "0.0", "1"]


def test_int_tuples_and_bools_in_saved_values_keep_their_own_text() -> None:
    x = torch.ones(2, 3, requires_grad=True)
    graph = trace((x.sum((0, 1)), x.sum((1,), keepdim=True), x.sum((1,), keepdim=False)), {"x": x})
    sums = [attrs for name, attrs in _attrs_by_op(graph) if name == "SumBackward1"]
    assert [(a["dim"], a["keepdim"]) for a in sums] == [("(0, 1)", "False"), ("(1,)", "True"), ("(1,)", "False")]


@pytest.mark.parametrize("ops", [0, 1, pytest.param(5000, marks=pytest.mark.slow)])  # 5000: past a 4096-record chunk
def test_to_json_is_the_text_of_the_whole_dict_at_any_size(ops: int) -> None:
    # to_json() writes a few thousand records at a time; the text must be
    # json.dumps of the whole dict, byte for byte, and read back the same.
    x = torch.ones(2, requires_grad=True)
    y = x * 2
    for _ in range(ops):
        y = y + 1
    traced = trace(y, {"x": x})
    graph = Graph(traced.nodes, traced.edges, ('a note with "quotes" and é',), True,
                  (ModuleInfo("", "Net", 2, 8),), traced.nodes[1].id)
    text = graph.to_json()
    assert text == json.dumps(graph.to_dict())
    assert graph.to_json(indent=1) == json.dumps(graph.to_dict(), indent=1)
    assert Graph.from_json(text) == graph
