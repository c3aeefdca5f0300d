"""torch.compile's regions: the compiled backward's ops, saved tensors and lines inside the box."""

from __future__ import annotations

import base64
import gzip
import json
import re
import shutil
from typing import Any

import pytest
import torch
from beyond_models import BrokenMLP, TanhMLP, compiled_output, line_of, transformer_block

from graphviz_app import Graph, render, trace
from graphviz_app.analysis.regions import region_names, show_regions
from graphviz_app.drawing.renderer import export
from graphviz_app.model import REGION_TYPE, Edge, EdgeKind, Node, NodeKind, human_bytes, to_compact
from graphviz_app.tracing import torch_internals
from graphviz_app.tracing.compiled import COMPILED_NODE, add_regions

pytestmark = pytest.mark.slow  # torch.compile takes seconds on its first call


def _compiled_fns(output: torch.Tensor) -> list[Any]:
    """The CompiledFunctionBackward nodes behind `output`, nearest the output first (the oracle's own walk)."""
    found, seen, todo = [], set(), [output.grad_fn]
    while todo:
        fn = todo.pop(0)
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        if type(fn).__name__ == COMPILED_NODE:
            found.append(fn)
        todo.extend(child for child, _ in fn.next_functions)
    return found


def _fx_ops(fn: Any) -> list[str]:
    """The backward graph's call_function nodes, read straight from torch (torch 2.13's attribute names)."""
    module = fn._forward_cls._lazy_backward_info.bw_module
    return [str(n.target) if hasattr(n.target, "overloadpacket") else n.target.__name__
            for n in module.graph.nodes if n.op == "call_function"]


def _held_bytes(tensors: tuple[torch.Tensor, ...]) -> int:
    """Bytes the saved tensors keep alive: each storage once, whole (a view keeps all of it)."""
    return sum({t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors}.values())


@pytest.fixture(scope="module")
def mlp() -> tuple[Graph, Any, TanhMLP]:
    torch.manual_seed(0)
    model = TanhMLP()
    y = compiled_output(model, torch.randn(3, 4, requires_grad=True))
    return trace(y, model), _compiled_fns(y)[0], model


@pytest.fixture(scope="module")
def block() -> tuple[Graph, Any]:
    y = compiled_output(transformer_block(), torch.randn(2, 5, 16, requires_grad=True))
    return trace(y), _compiled_fns(y)[0]


@pytest.mark.parametrize("which", ["mlp", "block"])
def test_the_ops_inside_are_the_backward_graphs_call_function_nodes(which: str, request: pytest.FixtureRequest) -> None:
    graph, fn = request.getfixturevalue(which)[:2]
    (region,) = graph.regions
    assert [n.name for n in region.nodes] == _fx_ops(fn)
    assert region.opened and all(n.kind is NodeKind.OP for n in region.nodes)
    compiled = [n for n in graph.nodes if n.name == COMPILED_NODE]
    assert [region.node] == [n.id for n in compiled]


@pytest.mark.parametrize("which", ["mlp", "block"])
def test_saved_bytes_equal_what_the_region_holds(which: str, request: pytest.FixtureRequest) -> None:
    graph, fn = request.getfixturevalue(which)[:2]
    box = next(n for n in show_regions(graph).nodes if n.kind is NodeKind.MODULE)
    held = _held_bytes(fn.saved_tensors)
    assert dict(box.attrs)["saved"] == human_bytes(held)
    saved = [graph.node(e.src) for e in graph.edges if e.kind is EdgeKind.SAVED and e.dst == graph.regions[0].node]
    assert [(n.tensor.shape, n.tensor.dtype, n.tensor.bytes) for n in saved if n.tensor] == [
        (tuple(t.shape), str(t.dtype).removeprefix("torch."), t.numel() * t.element_size()) for t in fn.saved_tensors
    ]
    assert all(dict(n.attrs).get("made by") for n in saved)  # an input of the region, or a forward op


def test_each_saved_tensor_names_the_forward_op_and_line_that_made_it(mlp: tuple[Graph, Any, TanhMLP]) -> None:
    graph, region = mlp[0], mlp[0].regions[0]
    saved = {n.name: n for n in graph.nodes if n.kind is NodeKind.SAVED}
    made_by = {name: dict(n.attrs)["made by"] for name, n in saved.items()}
    # The weights and the input are the region's inputs; the activations come from lines of beyond_models.py.
    assert sum("input" in text and "of the region" in text for text in made_by.values()) >= 3
    assert any(text.startswith("a.weight") or "(a.weight)" in text for text in made_by.values())
    sources = {n.source for n in saved.values() if n.source}
    assert f"beyond_models.py:{line_of('TANH_LINE')} in forward" in sources
    assert f"beyond_models.py:{line_of('SCALE_LINE')} in forward" in sources
    assert all("seq_nr" in made_by[n] for n, node in saved.items() if node.source)
    read_by = {e.src for e in region.edges if e.kind is EdgeKind.SAVED}
    assert read_by == {n.id for n in saved.values()}  # every saved tensor is read by an op inside


def test_the_ops_carry_their_forward_module_and_line(mlp: tuple[Graph, Any, TanhMLP]) -> None:
    region = mlp[0].regions[0]
    modules = {n.module for n in region.nodes}
    assert {"[compiled region 1].a", "[compiled region 1].b"} <= modules
    assert dict((m.name, m.type) for m in region.modules)["[compiled region 1].a"] == "Linear"
    tanh = next(n for n in region.nodes if n.name == "aten.tanh_backward.default")
    assert tanh.source == f"beyond_models.py:{line_of('TANH_LINE')} in forward"
    assert dict(tanh.attrs)["for"] == "tanh" and "seq_nr" in dict(tanh.attrs)


def test_a_closed_region_is_a_box_and_an_open_one_its_ops(mlp: tuple[Graph, Any, TanhMLP]) -> None:
    graph = mlp[0]
    region = graph.regions[0]
    closed = show_regions(graph)
    box = closed.node(region.node)
    assert box.kind is NodeKind.MODULE and box.module == region.name == "[compiled region 1]"
    assert dict(box.attrs)["type"] == REGION_TYPE and dict(box.attrs)["ops"] == str(len(region.nodes))
    assert not [n for n in closed.nodes if n.kind is NodeKind.SAVED]  # held inside the box
    opened = show_regions(graph, expanded={region.name})
    ids = {n.id for n in opened.nodes}
    assert region.node not in ids and {n.id for n in region.nodes} <= ids
    assert all(e.src in ids and e.dst in ids for e in opened.edges)
    leaf = next(n for n in opened.nodes if n.name == "a.weight")
    into = [opened.node(e.dst) for e in opened.edges if e.src == leaf.id]
    assert into and all(n.id.startswith(region.node + "/") for n in into)
    consumer = next(e.dst for e in graph.edges if e.src == region.node)
    fed_by = [e.src for e in opened.edges if e.dst == consumer]
    assert fed_by and all(src.startswith(region.node + "/") for src in fed_by)
    saved_edges = [e for e in opened.edges if e.kind is EdgeKind.SAVED]
    assert len(saved_edges) >= len([n for n in graph.nodes if n.kind is NodeKind.SAVED])
    dot = render(graph, expanded=frozenset({region.name})).source
    assert 'subgraph "cluster_[compiled region 1]"' in dot and "aten.tanh_backward.default" in dot


def test_a_graph_break_gives_two_regions_among_eager_ops() -> None:
    torch.manual_seed(0)
    model = BrokenMLP()
    y = compiled_output(model, torch.randn(3, 4, requires_grad=True))
    graph = trace(y, model)
    assert [r.name for r in graph.regions] == ["[compiled region 1]", "[compiled region 2]"]
    assert all(r.opened for r in graph.regions)
    boxes = [n for n in show_regions(graph).nodes if n.kind is NodeKind.MODULE]
    assert [b.module for b in boxes] == ["[compiled region 1]", "[compiled region 2]"]
    assert any(n.kind is NodeKind.OP and n.name != COMPILED_NODE for n in graph.nodes)  # eager ops between
    second, first = graph.regions  # walk order: the region nearest the output first
    assert any(e.src == first.node and e.dst == second.node for e in graph.edges)
    both = show_regions(graph, expanded={r.name for r in graph.regions})
    assert not any(n.name == COMPILED_NODE or n.kind is NodeKind.MODULE for n in both.nodes)


def test_regions_survive_the_json_round_trip(mlp: tuple[Graph, Any, TanhMLP]) -> None:
    graph = mlp[0]
    again = Graph.from_json(graph.to_json())
    assert again == graph and again.regions == graph.regions
    assert Graph.from_dict(to_compact(graph)) == graph  # the viewer's compact form


def test_the_viewer_gets_the_region_open_as_a_box_of_its_own(mlp: tuple[Graph, Any, TanhMLP]) -> None:
    graph = mlp[0]
    from graphviz_app.viewer.tree import build_tree

    shown = show_regions(graph, expanded=region_names(graph))
    tree = build_tree(shown)
    assert "[compiled region 1]" in tree.module and "[compiled region 1].a" in tree.module
    page = export(graph, "html").decode()
    packed = re.search(r'<script type="application/octet-stream" id="gv-payload">([^<]*)</script>', page)
    assert packed is not None
    drawn = Graph.from_dict(json.loads(gzip.decompress(base64.b64decode(packed.group(1))))["graph"])
    region = graph.regions[0]
    assert {n.id for n in region.nodes} <= {n.id for n in drawn.nodes}  # the file holds the ops, opened
    assert {m.name for m in region.modules} <= {m.name for m in drawn.modules}  # ... in boxes the viewer closes
    assert region.node not in {n.id for n in drawn.nodes}


def test_a_torch_that_moved_the_graph_fails_loudly() -> None:
    # If a torch upgrade renames an attribute on the path, this test names it (instead of
    # every compiled box silently opening onto nothing).
    torch.manual_seed(0)
    y = compiled_output(TanhMLP(), torch.randn(3, 4, requires_grad=True))
    module, reason = torch_internals.compiled_backward_graph(_compiled_fns(y)[0])
    assert reason is None, f"torch {torch.__version__}: {reason}"
    assert isinstance(module, torch.fx.GraphModule)
    roles = [torch_internals.aot_role(n) for n in module.graph.nodes if n.op == "placeholder"]
    assert ("tangent", 0) in roles and ("input", 0) in roles, "torch's backward-graph descriptors moved"


class _Moved:
    """A compiled node as a torch that keeps its graph elsewhere would show it."""

    _forward_cls = type("CompiledFunction", (), {})


def test_a_region_that_cannot_be_opened_says_why() -> None:
    module, reason = torch_internals.compiled_backward_graph(_Moved())
    assert module is None and "_lazy_backward_info" in (reason or "")
    graph = Graph((Node("n0", NodeKind.OUTPUT, "output"), Node("n1", NodeKind.OP, COMPILED_NODE)), (Edge("n1", "n0"),))
    (region,) = add_regions(graph, {"n1": _Moved()}).regions
    assert not region.opened and "could not be opened" in region.notes[0]
    box = show_regions(add_regions(graph, {"n1": _Moved()}), expanded={region.name}).node("n1")
    assert box.kind is NodeKind.MODULE and "_lazy_backward_info" in dict(box.attrs)["not opened"]


def _has_compiler() -> bool:
    return any(shutil.which(c) for c in ("g++", "c++", "clang++"))


@pytest.mark.skipif(not _has_compiler(), reason="inductor needs a C++ compiler (g++) on PATH")
def test_inductor_shows_the_graph_before_code_generation() -> None:
    torch.manual_seed(0)
    model = TanhMLP()
    y = compiled_output(model, torch.randn(3, 4, requires_grad=True), backend="inductor")
    graph = trace(y, model)
    (region,) = graph.regions
    assert [n.name for n in region.nodes] == _fx_ops(_compiled_fns(y)[0])
    assert any("fuses them into kernels" in note for note in region.notes)


def test_tracing_each_step_of_a_compiled_model_reads_its_backward_once() -> None:
    """A training loop traces every step: the same compiled function gives the same region, shared."""
    torch.manual_seed(0)
    model = TanhMLP()
    torch.compiler.reset()
    step = torch.compile(model, backend="aot_eager")
    first = trace(step(torch.randn(3, 4, requires_grad=True)).sum(), model)
    again = trace(step(torch.randn(3, 4, requires_grad=True)).sum(), model)
    assert again.regions == first.regions
    made_by = [[(n.attrs, n.source) for n in g.nodes if n.kind is NodeKind.SAVED] for g in (first, again)]
    assert made_by[0] == made_by[1] and all(dict(attrs).get("made by") for attrs, _ in made_by[0])
    assert all(a is b for a, b in zip(again.regions[0].nodes, first.regions[0].nodes, strict=True))


def test_a_recompiled_function_shows_its_own_shapes() -> None:
    """New input shapes make torch compile again: the region shows the new backward, not the one read before."""
    torch.manual_seed(0)
    model = TanhMLP()
    torch.compiler.reset()
    step = torch.compile(model, backend="aot_eager", dynamic=False)
    small = trace(step(torch.randn(3, 4, requires_grad=True)).sum(), model)
    large = trace(step(torch.randn(7, 4, requires_grad=True)).sum(), model)
    small_shapes = {n.tensor.shape for n in small.regions[0].nodes if n.tensor}
    large_shapes = {n.tensor.shape for n in large.regions[0].nodes if n.tensor}
    assert (3, 8) in small_shapes and (7, 8) in large_shapes
    assert (7, 8) not in small_shapes and (3, 8) not in large_shapes
