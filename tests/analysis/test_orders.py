"""Orders of derivatives: each node made by a backward with create_graph=True knows which backward made it."""

from __future__ import annotations

import base64
import gzip
import json
import re
import threading

import pytest
import torch

from graphviz_app import Graph, record_orders, render, trace
from graphviz_app.analysis.orders import node_orders, order_counts, unrecorded_orders_note
from graphviz_app.drawing.renderer import export
from graphviz_app.errors import RenderError
from graphviz_app.model import NodeKind, to_compact
from graphviz_app.tracing import orders, torch_internals
from graphviz_app.tracing.torch_internals import next_sequence_nr


def _f(x: torch.Tensor) -> torch.Tensor:
    return (torch.tanh(x * 2) * x).sum()


def _second_order() -> tuple[Graph, list[int]]:
    """y = f(x); g = grad(y, x, create_graph); h = grad(g.sum(), x, create_graph): the graph of g.sum() + h.sum().

    Also the sequence numbers taken between the calls, and the output op's (to read each node's own back).
    """
    x = torch.tensor([0.3, -1.2, 2.0], requires_grad=True)
    with record_orders():
        y = _f(x)
        first = next_sequence_nr()
        (g,) = torch.autograd.grad(y, x, create_graph=True)
        between = next_sequence_nr()
        s = g.sum()
        second = next_sequence_nr()
        (h,) = torch.autograd.grad(s, x, create_graph=True)
        after = next_sequence_nr()
    out = s + h.sum()
    return trace(out, {"x": x}), [first, between, second, after, after + 1]


def _seq(graph: Graph, node_id: str, newest: int) -> int:
    """A node's sequence number, from `recency` (counted back from the output's op)."""
    recency = graph.node(node_id).recency
    assert recency is not None
    return newest - recency


def test_every_node_of_the_second_backward_is_order_2_by_sequence_numbers() -> None:
    graph, (first, between, second, after, newest) = _second_order()
    ops = [n for n in graph.nodes if n.kind is NodeKind.OP]
    by_range = {}
    for n in ops:
        seq = _seq(graph, n.id, newest)
        if first <= seq < between:
            by_range[n.id] = 1
        elif second <= seq < after:
            by_range[n.id] = 2
        else:
            by_range[n.id] = 0  # the forward, g.sum() and the final sum
    assert {n.id: n.order for n in ops} == by_range
    assert sorted(set(by_range.values())) == [0, 1, 2]
    assert order_counts(graph)[2] == sum(1 for v in by_range.values() if v == 2)


def test_each_higher_order_node_names_the_node_whose_backward_made_it() -> None:
    graph, (first, between, second, _, _) = _second_order()
    made = [n for n in graph.nodes if n.order]
    pairs = {(n.name, graph.node(n.differentiates).name) for n in made if n.differentiates}
    assert ("TanhBackwardBackward0", "TanhBackward0") in pairs  # order 1 (and 2) from the forward's tanh
    outside = 0
    for n in made:
        named = dict(n.attrs).get(orders.OUTSIDE_ATTR)
        assert (n.differentiates is None) != (named is None), f"{n.id} {n.name}: names no node it differentiates"
        if n.differentiates is not None:
            assert (graph.node(n.differentiates).order or 0) < n.order  # a backward differentiates lower orders
            continue
        # The forward's `tanh(..) * x` is not reached from the traced output: named by its sequence number,
        # which lies before the backward that differentiated it.
        found = re.fullmatch(r"(\w+) \(seq_nr (\d+)\), not in this graph", named)
        assert found is not None, named
        assert int(found.group(2)) < (first if n.order == 1 else second)
        outside += 1
    assert outside >= 1
    assert "order 1 of MulBackward0 (not drawn)" in render(graph, color_by="order").source


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")
def test_backward_with_create_graph_numbers_the_leaves_gradients() -> None:
    # A gradient penalty: the gradient goes into x.grad through .backward(create_graph=True).
    x = torch.tensor([0.5, 1.5], requires_grad=True)
    with record_orders():
        _f(x).backward(create_graph=True)
    assert x.grad is not None and x.grad.grad_fn is not None
    graph = trace(x.grad.sum(), {"x": x})
    assert {n.order for n in graph.nodes if n.kind is NodeKind.OP and n.name.endswith("BackwardBackward0")} == {1}
    x.grad = None  # the gradient's graph refers back to x: break the cycle


def test_without_record_orders_there_are_no_orders_and_a_note_says_how() -> None:
    x = torch.tensor([0.5, 1.5], requires_grad=True)
    (g,) = torch.autograd.grad(_f(x), x, create_graph=True)
    graph = trace(g.sum())
    assert all(n.order is None for n in graph.nodes) and node_orders(graph) == {}
    note = unrecorded_orders_note(graph)
    assert note is not None and "TanhBackwardBackward0" in note and "record_orders()" in note
    with pytest.raises(RenderError, match="color_by='order' needs a graph with orders"):
        render(graph, color_by="order")


def test_the_drawing_colours_each_order_and_the_json_keeps_them() -> None:
    graph, _ = _second_order()
    dot = render(graph, color_by="order").source
    assert "order 1: made by the forward's backward" in dot
    assert "order 2: made by the backward of order 1" in dot
    assert 'fillcolor="#fff3bf"' in dot and 'fillcolor="#ffc9c9"' in dot
    again = Graph.from_json(graph.to_json())
    assert again == graph
    assert Graph.from_dict(to_compact(graph)) == graph  # the viewer's compact form keeps them too
    assert '"order": 2' in graph.to_json() and '"differentiates"' in graph.to_json()


def test_record_orders_puts_torch_back_also_when_the_block_raises() -> None:
    before = torch.autograd.grad.__globals__["_engine_run_backward"]
    with pytest.raises(ValueError, match="inside"), record_orders():
        assert torch.autograd.grad.__globals__["_engine_run_backward"] is not before
        raise ValueError("inside")
    assert torch.autograd.grad.__globals__["_engine_run_backward"] is before
    assert torch.autograd.graph._engine_run_backward is before


def test_only_the_thread_that_records_is_numbered() -> None:
    x = torch.tensor([0.5], requires_grad=True)
    results: dict[str, torch.Tensor] = {}

    def other() -> None:
        (results["other"],) = torch.autograd.grad(torch.tanh(x).sum(), x, create_graph=True)

    with record_orders():
        worker = threading.Thread(target=other)
        worker.start()
        worker.join(timeout=60)
        (results["here"],) = torch.autograd.grad(torch.tanh(x).sum(), x, create_graph=True)
    assert results["here"].grad_fn.metadata.get(orders.ORDER_KEY) == 1
    assert orders.ORDER_KEY not in results["other"].grad_fn.metadata


def test_a_torch_without_the_backward_entry_point_fails_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(torch.autograd, "_engine_run_backward")
    with pytest.raises(RuntimeError, match=r"torch\.autograd\._engine_run_backward"):
        torch_internals.wrap_run_backward(lambda run: run)


def test_the_viewer_offers_an_order_colouring() -> None:
    graph, _ = _second_order()
    page = export(graph, "html").decode()
    packed = re.search(r'<script type="application/octet-stream" id="gv-payload">([^<]*)</script>', page)
    assert packed is not None
    data = json.loads(gzip.decompress(base64.b64decode(packed.group(1))))
    colouring = next(o for o in data["overlays"] if o["key"] == "order")
    shown = Graph.from_dict(data["graph"])
    assert {colouring["node"][i] for i, n in enumerate(shown.nodes) if n.order == 2} == {2}
    assert colouring["group"][0] == 2  # the whole graph holds order 2
