"""trace(gradients=True) equals per-node hooks, leaves .grad alone, keeps the graph usable."""

from __future__ import annotations

import math

import pytest
import torch
from grad_corpus import CORPUS, build
from grad_oracle import reference_gradients, reference_info, walk_fns

from graphviz_app import trace
from graphviz_app.errors import GradientError, NoGradFnError
from graphviz_app.model import EdgeKind, GradInfo, Graph, NodeKind


def _outputs(case_outputs: object) -> list[torch.Tensor]:
    return list(case_outputs) if isinstance(case_outputs, tuple) else [case_outputs]  # type: ignore[arg-type]


def _close(ours: GradInfo | None, ref: GradInfo) -> None:
    assert ours is not None
    assert (ours.numel, ours.nan, ours.inf) == (ref.numel, ref.nan, ref.inf)
    for name in ("norm", "max_abs", "mean_abs", "zero_fraction"):
        assert getattr(ours, name) == pytest.approx(getattr(ref, name), rel=1e-6, abs=1e-12), name
    if ref.values is None:
        assert ours.values is None
    else:
        assert ours.values is not None and len(ours.values) == len(ref.values)
        for a, b in zip(ours.values, ref.values, strict=True):
            assert a == b if isinstance(b, str) else a == pytest.approx(b, rel=1e-6, abs=1e-12)


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_statistics_equal_hooks_of_our_own(name: str) -> None:
    case = build(name)
    outputs = _outputs(case.outputs)
    graph = trace(case.outputs, case.params, gradients=True, show_saved=False, show_attrs=False)
    fns = walk_fns(outputs)
    walked = [n for n in graph.nodes if n.kind in (NodeKind.OP, NodeKind.LEAF)]
    assert [n.name for n in walked if n.kind is NodeKind.OP] == [
        type(f).__name__ for f in fns if not hasattr(f, "variable")
    ]
    node_ref, edge_ref = reference_gradients(outputs, fns)
    position = {n.id: i for i, n in enumerate(walked)}
    for node in walked:
        _close(node.grad, reference_info(node_ref[position[node.id]]))
    data = [e for e in graph.edges if e.kind is EdgeKind.DATA and e.dst in position]
    assert data, "the graph has data edges between ops"
    for edge in data:
        _close(edge.grad, reference_info(edge_ref[(position[edge.dst], edge.slot)]))
    assert graph.nonfinite_origin is None
    assert Graph.from_json(graph.to_json()) == graph
    assert hash(Graph.from_json(graph.to_json())) == hash(graph)


def test_a_tensor_used_twice_shows_both_contributions() -> None:
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    h = x * 3  # h = [3, 6], used by h * h (twice) and by + h
    graph = trace(h * h + h, {"x": x}, gradients=True, grad_outputs=torch.ones(2))
    h_node = next(n for n in graph.nodes if n.kind is NodeKind.OP and n.grad and n.grad.values == (7.0, 13.0))
    contributions = sorted(e.grad.values for e in graph.edges if e.src == h_node.id and e.grad)  # type: ignore[union-attr, type-var]
    # each factor of h * h receives the other, h = [3, 6]; + h passes 1 on: 3 + 3 + 1 = 7
    assert contributions == [(1.0, 1.0), (3.0, 6.0), (3.0, 6.0)]


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_grad_fields_unchanged_and_graph_still_backpropagates(name: str) -> None:
    case = build(name)
    leaves = list(case.params.values())
    existing = leaves[0]
    existing.grad = torch.full_like(existing, 7.0)
    trace(case.outputs, case.params, gradients=True)
    assert torch.equal(existing.grad, torch.full_like(existing, 7.0)), "existing .grad was accumulated into"
    assert all(t.grad is None for t in leaves[1:]), "a None .grad was filled"
    expected = torch.autograd.grad(_outputs(case.outputs)[0].sum(), leaves, retain_graph=True, allow_unused=True)
    _outputs(case.outputs)[0].sum().backward()  # the graph was retained
    for t, g in zip(leaves[1:], expected[1:], strict=True):
        assert (t.grad is None) == (g is None)
        if g is not None:
            assert torch.allclose(t.grad, g)


def test_seed_leaf_gradient_is_the_hand_derived_one() -> None:
    graph = trace(*build("seed"), gradients=True)
    leaf = next(n for n in graph.nodes if n.kind is NodeKind.LEAF)
    assert leaf.grad is not None and leaf.grad.values is not None
    assert [round(float(v), 4) for v in leaf.grad.values] == [1.3333, 2.0, 2.6667]
    assert leaf.grad.norm == pytest.approx(math.sqrt(16 / 9 + 4 + 64 / 9), rel=1e-6)


def test_non_scalar_output_uses_ones_with_a_note_or_the_given_gradient() -> None:
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    graph = trace(x * x, {"x": x}, gradients=True)
    assert any("all ones" in n for n in graph.notes)
    leaf = next(n for n in graph.nodes if n.kind is NodeKind.LEAF)
    assert leaf.grad is not None and leaf.grad.values == (2.0, 4.0)
    graph = trace(x * x, {"x": x}, gradients=True, grad_outputs=torch.tensor([0.5, 0.0]))
    leaf = next(n for n in graph.nodes if n.kind is NodeKind.LEAF)
    assert leaf.grad is not None and leaf.grad.values == (1.0, 0.0)
    assert not any("all ones" in n for n in graph.notes)


def test_freed_saved_tensors_say_trace_before_backward() -> None:
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    y.backward()
    with pytest.raises(GradientError, match=r"trace before backward\(\), or use retain_graph=True"):
        trace(y, gradients=True)
    with pytest.raises(GradientError, match=r"trace before backward\(\), or use retain_graph=True"):
        trace(y, gradients=True, show_saved=False, show_attrs=False)


def test_output_that_does_not_require_grad_is_refused() -> None:
    with torch.no_grad():
        y = torch.ones(2).sum()
    with pytest.raises(NoGradFnError, match="does not require grad"):
        trace(y, gradients=True)


def test_graph_cut_by_max_nodes_is_refused() -> None:
    x = torch.ones(2, requires_grad=True)
    y = x
    for _ in range(20):
        y = y * 1.5
    with pytest.raises(GradientError, match=r"max_nodes.*raise max_nodes, or trace with gradients=False"):
        trace(y.sum(), gradients=True, max_nodes=5)


def test_grad_outputs_of_the_wrong_shape_are_refused() -> None:
    x = torch.ones(3, requires_grad=True)
    with pytest.raises(GradientError, match=r"grad_outputs for output has shape \(2,\), expected .*\(3,\)"):
        trace(x * 2, gradients=True, grad_outputs=torch.ones(2))


def test_plain_trace_has_no_gradients() -> None:
    graph = trace(*build("seed"))
    assert all(n.grad is None for n in graph.nodes) and graph.nonfinite_origin is None


@pytest.mark.cuda
def test_cuda_gradients_match_cpu() -> None:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    x = torch.randn(5, 4)
    cpu = trace(net(x).pow(2).mean(), dict(net.named_parameters()), gradients=True)
    net.cuda()
    gpu = trace(net(x.cuda()).pow(2).mean(), dict(net.named_parameters()), gradients=True)
    for a, b in zip(cpu.nodes, gpu.nodes, strict=True):
        assert (a.grad is None) == (b.grad is None)
        if a.grad is not None and b.grad is not None:
            assert b.grad.norm == pytest.approx(a.grad.norm, rel=1e-4)


def test_an_output_that_retains_grad_keeps_its_grad() -> None:
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = (x * 2).sum()
    y.retain_grad()
    trace(y, gradients=True)
    assert y.grad is None
