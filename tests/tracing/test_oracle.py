"""Our traced graphs against the reference answers: torchviz's make_dot and torch itself."""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest
from core_corpus import CORPUS, build
from core_oracle import (
    ours_op_edges,
    ours_ops,
    torch_walk_ops,
    torchviz_ops,
    torchviz_saved_count,
)

from graphviz_app import trace
from graphviz_app.model import EdgeKind, NodeKind

pytestmark = pytest.mark.filterwarnings(
    "ignore:distutils Version classes are deprecated:DeprecationWarning"  # torchviz's import
)


@pytest.fixture(scope="module")
def torchviz() -> ModuleType:
    return importlib.import_module("torchviz")  # the reference answer, a dev dependency


# torchviz crashes on this one (see test_torchviz_crashes_on_a_saved_none).
TORCHVIZ_CORPUS = [name for name in CORPUS if name != "custom_function_saving_none"]


@pytest.mark.usefixtures("deep_recursion")
@pytest.mark.parametrize("name", TORCHVIZ_CORPUS)
def test_op_names_and_op_edges_equal_torchviz(torchviz: ModuleType, name: str) -> None:
    case = build(name)
    ours = trace(case.outputs, case.params)
    theirs_ops, theirs_edges = torchviz_ops(torchviz.make_dot(case.outputs, case.params).source)
    assert ours_ops(ours) == theirs_ops
    assert ours_op_edges(ours) == theirs_edges


@pytest.mark.usefixtures("deep_recursion")
@pytest.mark.parametrize("name", TORCHVIZ_CORPUS)
def test_saved_tensor_count_equals_torchviz(torchviz: ModuleType, name: str) -> None:
    case = build(name)
    ours = trace(case.outputs, case.params, show_saved=True)
    source = torchviz.make_dot(case.outputs, case.params, show_saved=True).source
    assert len(ours.of_kind(NodeKind.SAVED)) == torchviz_saved_count(source)
    assert sum(e.kind is EdgeKind.SAVED for e in ours.edges) == torchviz_saved_count(source)


@pytest.mark.parametrize("name", list(CORPUS))
def test_op_names_equal_a_plain_next_functions_walk(name: str) -> None:
    case = build(name)
    assert ours_ops(trace(case.outputs, case.params)) == torch_walk_ops(case.outputs)


@pytest.mark.parametrize("name", list(CORPUS))
def test_leaf_names_are_the_params_given(name: str) -> None:
    case = build(name)
    graph = trace(case.outputs, case.params)
    leaves = {n.name for n in graph.of_kind(NodeKind.LEAF)}
    assert leaves <= set(case.params or {})
    assert "" not in leaves  # every leaf of the corpus is a named parameter


def test_torchviz_crashes_on_a_saved_none_and_we_do_not(torchviz: ModuleType) -> None:
    """The motivating difference: ctx.save_for_backward(x, None, w) is legal torch."""
    case = build("custom_function_saving_none")
    with pytest.raises(AttributeError, match="'NoneType' object has no attribute 'size'"):
        torchviz.make_dot(case.outputs, case.params)
    graph = trace(case.outputs, case.params)
    (op,) = [n for n in graph.nodes if n.name == "ScaleSaveNoneBackward"]
    saved = [graph.node(e.src) for e in graph.edges if e.kind is EdgeKind.SAVED and e.dst == op.id]
    assert [n.name for n in saved] == ["saved_tensors[0]", "saved_tensors[2]"]
    x, w = case.params["x"], case.params["w"]
    assert saved[0].tensor.values == pytest.approx(x.exp().tolist())
    assert saved[1].tensor.values == tuple(w.tolist())


def test_the_torchviz_parser_reads_the_seed_example(torchviz: ModuleType) -> None:
    """Guards the oracle itself: a parser that read nothing would make every test above pass."""
    case = build("seed_example")
    ops, edges = torchviz_ops(torchviz.make_dot(case.outputs).source)
    assert ops == {"MeanBackward0": 1, "AddBackward0": 2, "PowBackward0": 1, "AccumulateGrad": 1}
    assert edges == {
        ("AddBackward0", "MeanBackward0"): 1,
        ("PowBackward0", "AddBackward0"): 1,
        ("AddBackward0", "PowBackward0"): 1,
        ("AccumulateGrad", "AddBackward0"): 1,
    }
