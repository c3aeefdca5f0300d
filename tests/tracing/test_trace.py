"""What trace() records: structure, tensor facts, names, notes, saved tensors, devices."""

from __future__ import annotations

import importlib

import pytest
import torch
from core_corpus import build
from torch import nn

from graphviz_app import render, trace
from graphviz_app.drawing.style import CROSS_DEVICE_STYLE
from graphviz_app.model import Edge, EdgeKind, Graph, NodeKind
from graphviz_app.tracing.big_stack import call_with_large_stack


def _saved_of(graph: Graph, op_id: str) -> list[str]:
    return [graph.node(e.src).name for e in graph.edges if e.kind is EdgeKind.SAVED and e.dst == op_id]


def test_seed_example_walks_from_the_output_to_the_leaf() -> None:
    x = torch.arange(3.0, requires_grad=True)
    y = ((x + 2) ** 2 + 3).mean()
    graph = trace(y)
    walk = [(n.kind, n.name) for n in graph.nodes if n.kind is not NodeKind.SAVED]
    assert walk == [
        (NodeKind.OUTPUT, "output"),
        (NodeKind.OP, "MeanBackward0"),
        (NodeKind.OP, "AddBackward0"),
        (NodeKind.OP, "PowBackward0"),
        (NodeKind.OP, "AddBackward0"),
        (NodeKind.LEAF, ""),
    ]
    # ids are n0, n1, ... in walk order, and the data edges form the chain
    assert [n.id for n in graph.nodes] == [f"n{i}" for i in range(len(graph.nodes))]
    data = [(e.src, e.dst) for e in graph.edges if e.kind is EdgeKind.DATA]
    assert data == [("n1", "n0"), ("n2", "n1"), ("n3", "n2"), ("n5", "n3"), ("n6", "n5")]


def test_seed_example_tensor_facts_match_torch() -> None:
    x = torch.arange(3.0, requires_grad=True)
    y = ((x + 2) ** 2 + 3).mean()
    graph = trace(y)
    (leaf,) = graph.of_kind(NodeKind.LEAF)
    t = leaf.tensor
    assert (t.shape, t.dtype, t.device, t.numel, t.bytes) == ((3,), "float32", "cpu", 3, 12)
    assert t.values == (0.0, 1.0, 2.0) and t.requires_grad
    (out,) = graph.of_kind(NodeKind.OUTPUT)
    assert out.tensor.shape == () and out.tensor.values == pytest.approx((y.item(),))
    (pow_op,) = [n for n in graph.nodes if n.name == "PowBackward0"]
    assert ("exponent", "2") in pow_op.attrs
    (saved,) = [graph.node(e.src) for e in graph.edges if e.kind is EdgeKind.SAVED]
    assert saved.name == "self" and saved.tensor.values == tuple((x + 2).tolist())
    mean = graph.node("n1")
    assert mean.tensor.shape == () and mean.tensor.dtype == "float32"


@pytest.mark.parametrize(
    ("show_saved", "show_attrs", "saved_nodes", "ops_with_attrs"),
    [(True, True, 1, 4), (True, False, 1, 0), (False, True, 0, 4), (False, False, 0, 0)],
)
def test_show_saved_and_show_attrs(
    show_saved: bool, show_attrs: bool, saved_nodes: int, ops_with_attrs: int
) -> None:
    graph = trace(build("seed_example").outputs, show_saved=show_saved, show_attrs=show_attrs)
    assert len(graph.of_kind(NodeKind.SAVED)) == saved_nodes
    assert sum(bool(n.attrs) for n in graph.of_kind(NodeKind.OP)) == ops_with_attrs
    assert len(graph.of_kind(NodeKind.OP)) == 4  # the ops never depend on the flags


@pytest.mark.parametrize("as_", ["dict", "named_parameters"])
def test_params_name_the_leaves(as_: str) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    out = model(torch.randn(3, 4)).sum()
    params = dict(model.named_parameters()) if as_ == "dict" else model.named_parameters()
    leaves = trace(out, params).of_kind(NodeKind.LEAF)
    assert sorted(n.name for n in leaves) == ["0.bias", "0.weight", "2.bias", "2.weight"]
    shapes = {n.name: n.tensor.shape for n in leaves}
    assert shapes["0.weight"] == (8, 4) and shapes["2.bias"] == (2,)
    assert all(n.tensor.name == n.name for n in leaves)


def test_unnamed_leaves_are_labelled_by_shape() -> None:
    a = torch.ones(2, 3, requires_grad=True)
    b = torch.ones(3, requires_grad=True)
    graph = trace((a * b).sum(), {"b": b})
    leaves = {n.name: n for n in graph.of_kind(NodeKind.LEAF)}
    assert set(leaves) == {"", "b"}
    source = render(graph).source
    assert f'{leaves[""].id} [label="(2, 3) float32 cpu\\n= [1, 1, 1, 1, 1, 1]"' in source
    assert f'{leaves["b"].id} [label="b\\n(3,) float32 cpu\\n= [1, 1, 1]"' in source


def test_nested_outputs_with_non_tensor_entries_are_noted() -> None:
    x = torch.arange(3.0, requires_grad=True)
    a = x * 2
    outputs = {"loss": a.sum(), "aux": [a.exp(), 3, None, {"deep": (a.sin(), "text")}]}
    graph = trace(outputs)
    assert [n.name for n in graph.of_kind(NodeKind.OUTPUT)] == [
        "output['loss']",
        "output['aux'][0]",
        "output['aux'][3]['deep'][0]",
    ]
    assert graph.notes == (
        "output['aux'][1] is a int, not a tensor: ignored",
        "output['aux'][2] is a NoneType, not a tensor: ignored",
        "output['aux'][3]['deep'][1] is a str, not a tensor: ignored",
    )
    assert [n.name for n in graph.nodes].count("MulBackward0") == 1  # shared subgraph once


def test_an_output_without_a_graph_beside_others_is_skipped_with_a_note() -> None:
    x = torch.arange(3.0, requires_grad=True)
    graph = trace(((x * 2).sum(), torch.ones(2)))
    assert [n.name for n in graph.of_kind(NodeKind.OUTPUT)] == ["output[0]"]
    (note,) = graph.notes
    assert note.startswith("output[1] has no autograd graph and was skipped: nothing that requires grad reaches it")


def test_custom_function_saving_none_keeps_its_tensors() -> None:
    case = build("custom_function_saving_none")
    graph = trace(case.outputs, case.params)
    (op,) = [n for n in graph.nodes if n.name == "ScaleSaveNoneBackward"]
    assert _saved_of(graph, op.id) == ["saved_tensors[0]", "saved_tensors[2]"]
    assert ("saved_tensors[1]", "None") in op.attrs  # the None is shown, as an attribute
    case.outputs.backward()  # and the graph traced is a working one
    assert case.params["w"].grad.tolist() == pytest.approx(case.params["x"].exp().tolist())


def test_dtype_change_is_a_to_copy_op_on_one_device() -> None:
    x = torch.arange(3.0, requires_grad=True)
    graph = trace(x.double().sum())
    (copy,) = [n for n in graph.nodes if n.name == "ToCopyBackward0"]
    (leaf,) = graph.of_kind(NodeKind.LEAF)
    assert (copy.tensor.dtype, leaf.tensor.dtype) == ("float64", "float32")
    assert graph.cross_device_ops() == frozenset()
    assert graph.summary().dtypes == ("float32", "float64")


def test_cpu_to_meta_copy_is_a_highlighted_cross_device_op() -> None:
    """The meta device gives a real cross-device ToCopyBackward0 without a GPU."""
    x = torch.ones(3, requires_grad=True)
    graph = trace((x.to("meta") * 2).sum())
    (copy,) = [n for n in graph.nodes if n.name == "ToCopyBackward0"]
    assert (copy.device, graph.of_kind(NodeKind.LEAF)[0].device) == ("meta", "cpu")
    assert graph.cross_device_ops() == {copy.id}
    line = next(s for s in render(graph).body if s.startswith(f"\t{copy.id} ["))
    assert f'color="{CROSS_DEVICE_STYLE["color"]}"' in line and "penwidth=3" in line


@pytest.mark.cuda
def test_cpu_to_cuda_copy_is_a_highlighted_cross_device_op() -> None:
    x = torch.ones(3, requires_grad=True)
    graph = trace((x.cuda() * 2).sum())
    (copy,) = [n for n in graph.nodes if n.name == "ToCopyBackward0"]
    assert copy.device == "cuda:0" and graph.of_kind(NodeKind.LEAF)[0].device == "cpu"
    assert graph.cross_device_ops() == {copy.id}
    line = next(s for s in render(graph).body if s.startswith(f"\t{copy.id} ["))
    assert f'color="{CROSS_DEVICE_STYLE["color"]}"' in line


@pytest.mark.filterwarnings("ignore:distutils Version classes:DeprecationWarning")
def test_show_saved_after_backward_marks_saved_tensors_freed() -> None:
    torchviz = importlib.import_module("torchviz")  # the reference answer, a dev dependency
    x = torch.arange(3.0, requires_grad=True)
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        torchviz.make_dot(y, show_saved=True)  # the motivating difference
    graph = trace(y, show_saved=True)
    saved = graph.of_kind(NodeKind.SAVED)
    assert [(n.name, n.tensor.freed) for n in saved] == [("other", True), ("self", True)]
    assert graph.notes == (
        "2 saved tensor(s) were already freed by backward(); trace before backward(), "
        "or call backward(retain_graph=True), to see them",
    )
    assert "(freed by backward)" in render(graph).source
    assert graph.summary().activations_total == 0 and graph.summary().devices == ("cpu",)
    assert "(2 freed by backward)" in str(graph.summary())


def test_custom_function_saved_tensors_freed_by_backward() -> None:
    case = build("custom_function")
    case.outputs.backward()
    graph = trace(case.outputs)
    (op,) = [n for n in graph.nodes if n.name == "ScaleSaveBothBackward"]
    (saved,) = [graph.node(e.src) for e in graph.edges if e.kind is EdgeKind.SAVED]
    assert (saved.name, saved.tensor.freed) == ("saved_tensors", True)
    assert _saved_of(graph, op.id) == ["saved_tensors"]


def test_double_backward_traces_the_gradient_graph() -> None:
    case = build("double_backward")
    graph = trace(case.outputs, case.params)
    (out,) = graph.of_kind(NodeKind.OUTPUT)
    x = case.params["x"]
    expected = 3 * x**2 * x.sin() + x**3 * x.cos()  # d/dx of x^3 sin x
    assert out.tensor.values == pytest.approx(expected.tolist())
    assert len(graph.of_kind(NodeKind.LEAF)) == 1  # every path ends at x


def test_an_output_view_draws_its_base() -> None:
    case = build("views_inplace")
    graph = trace(case.outputs, case.params)
    (base,) = graph.of_kind(NodeKind.VIEW_BASE)
    assert base.tensor.shape == (4,)
    assert Edge(base.id, "n0", EdgeKind.VIEW) in graph.edges
    assert "CopySlices" in {n.name for n in graph.of_kind(NodeKind.OP)}


@pytest.mark.parametrize(("max_nodes", "kept"), [(1, 0), (3, 2), (5, 4), (6, 5), (100, 5)])
def test_max_nodes_truncates_and_says_so(max_nodes: int, kept: int) -> None:
    graph = trace(build("seed_example").outputs, max_nodes=max_nodes, show_saved=False)
    assert len(graph.nodes) == min(max_nodes, 6)  # the output node counts too
    assert len(graph.of_kind(NodeKind.OP)) + len(graph.of_kind(NodeKind.LEAF)) == kept
    cut = kept < 5
    assert graph.truncated is cut
    note = f"stopped at max_nodes={max_nodes}: ops further from the output are not shown"
    assert (note in graph.notes) is cut
    ids = {n.id for n in graph.nodes}
    assert all(e.src in ids and e.dst in ids for e in graph.edges)


def test_max_nodes_cutting_off_a_second_output_still_renders() -> None:
    x = torch.arange(3.0, requires_grad=True)
    graph = trace(((x * 2).sum(), x.exp().sum()), max_nodes=3)
    assert graph.truncated and len(graph.nodes) == 3
    assert len(graph.of_kind(NodeKind.OUTPUT)) == 2
    assert all(e.src is not None for e in graph.edges)
    assert "n0" in render(graph).source


def _op_chain(ops: int) -> Graph:
    x = torch.ones(2, requires_grad=True)
    y = x
    for _ in range(ops):
        y = y + 1
    return trace(y, {"x": x})  # x, y and the chain are freed on the big stack


# 20,000 ops are far deeper than any recursion could go; the million is what the README promises.
@pytest.mark.parametrize("ops", [20_000, pytest.param(1_000_000, marks=pytest.mark.slow)])
def test_a_long_op_chain_traces(ops: int) -> None:
    graph = call_with_large_stack(_op_chain, ops)
    assert len(graph.nodes) == ops + 2  # output, the AddBackward0s, the leaf
    assert len(graph.edges) == ops + 1
    assert graph.nodes[-1].kind is NodeKind.LEAF and graph.nodes[-1].name == "x"
    assert graph.nodes[1].name == "AddBackward0" and graph.nodes[ops - 1].name == "AddBackward0"
    assert not graph.truncated and graph.notes == ()


NEGATIVE_DIMS = [
    ("transpose(0, -1)", lambda x: x.transpose(0, -1), "TransposeBackward0", ("dim1", "-1")),
    ("sum(-1)", lambda x: x.sum(-1), "SumBackward1", ("dim", "(-1,)")),
    ("squeeze(-2)", lambda x: x[:, :1].squeeze(-2), "SqueezeBackward1", ("dim", "-2")),
    ("select(-1, 0)", lambda x: x.select(-1, 0), "SelectBackward0", ("dim", "-1")),
    ("sum((0, -1))", lambda x: x.sum((0, -1)), "SumBackward1", ("dim", "(0, -1)")),
]


@pytest.mark.parametrize(("make", "op", "attr"), [c[1:] for c in NEGATIVE_DIMS], ids=[c[0] for c in NEGATIVE_DIMS])
def test_negative_dims_show_as_written(make: object, op: str, attr: tuple[str, str]) -> None:
    """torch hands negative int64 attributes back as uint64 (18446744073709551615 for -1)."""
    x = torch.ones(2, 3, 4, requires_grad=True)
    graph = trace(make(x).sum())  # type: ignore[operator]
    (node,) = [n for n in graph.of_kind(NodeKind.OP) if n.name == op]
    assert attr in node.attrs


def test_views_of_one_base_share_its_node() -> None:
    base = torch.arange(6.0, requires_grad=True) * 1
    first, second = base[:3], base[3:]
    graph = trace([first, second])
    bases = graph.of_kind(NodeKind.VIEW_BASE)
    assert len(bases) == 1
    assert bases[0].tensor is not None and bases[0].tensor.shape == (6,)
    view_edges = [e for e in graph.edges if e.kind is EdgeKind.VIEW]
    assert sorted(e.dst for e in view_edges) == sorted(n.id for n in graph.of_kind(NodeKind.OUTPUT))
    assert {e.src for e in view_edges} == {bases[0].id}
