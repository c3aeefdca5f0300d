"""Every error a user can hit: the exception type and a message that says what to do."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from graphviz_app import Graph, render, save, trace
from graphviz_app.drawing.renderer import export
from graphviz_app.errors import (
    DotNotFoundError,
    GraphvizAppError,
    NoGradFnError,
    RenderError,
    SchemaError,
    TraceError,
    UnsupportedFormatError,
)


def _x() -> torch.Tensor:
    return torch.arange(3.0, requires_grad=True)


def _under(ctx: Callable[[], Any]) -> torch.Tensor:
    x = _x()
    with ctx():
        return x * 2


def _seed_graph() -> Graph:
    x = _x()
    return trace(((x + 2) ** 2 + 3).mean())


def _out_and_model() -> tuple[torch.Tensor, nn.Module]:
    model = nn.Linear(3, 2)
    return model(torch.ones(3)).sum(), model


NO_GRAD_FN = [
    ("no requires_grad", lambda: torch.ones(3), "it does not require grad: .*requires_grad=True"),
    ("detached", lambda: (_x() * 2).detach(), r"it does not require grad: .*\.detach\(\)ed tensor"),
    ("under no_grad", lambda: _under(torch.no_grad), r"it does not require grad: .*torch\.no_grad\(\)"),
    ("under inference_mode", lambda: _under(torch.inference_mode), r"it was made under torch\.inference_mode\(\)"),
    ("a leaf", _x, r"it is a leaf tensor .*trace a result computed from it"),
]


@pytest.mark.parametrize(("make", "why"), [c[1:] for c in NO_GRAD_FN], ids=[c[0] for c in NO_GRAD_FN])
def test_a_tensor_without_grad_fn_says_why(make: Callable[[], Any], why: str) -> None:
    with pytest.raises(NoGradFnError, match=f"^cannot trace output: it has no grad_fn because {why}"):
        trace(make())


def test_outputs_all_without_grad_fn_name_the_first() -> None:
    with pytest.raises(NoGradFnError, match=r"^cannot trace output\[0\]: it has no grad_fn because"):
        trace((torch.ones(2), _x()))


@pytest.mark.parametrize(
    ("outputs", "found"),
    [([1, "a"], "list"), ({}, "dict"), (None, "NoneType"), ((3.0, [None]), "tuple"), ("text", "str")],
)
def test_outputs_holding_no_tensor(outputs: Any, found: str) -> None:
    with pytest.raises(TraceError, match=f"found no tensor to trace in a {found}: pass the tensor"):
        trace(outputs)


BAD_PARAMS = [
    ("not iterable", lambda m: 5, "params must be a dict name -> tensor or an iterable of"),
    ("value not a tensor", lambda m: {"w": 3}, r"params\['w'\] is a int, expected a tensor"),
    ("parameters() not named", lambda m: m.parameters(),
     r"model\.named_parameters\(\): found a bare tensor of shape \(2, 3\)"),
    ("list of tensors", lambda m: list(m.parameters()), r"bare tensor of shape \(2, 3\)"),
    ("pairs too short", lambda m: [("w",)], "not enough values to unpack"),
    ("strings", lambda m: ["weight"], "too many values to unpack"),
]


@pytest.mark.parametrize(("make", "match"), [c[1:] for c in BAD_PARAMS], ids=[c[0] for c in BAD_PARAMS])
def test_bad_params(make: Callable[[nn.Module], Any], match: str) -> None:
    out, model = _out_and_model()
    with pytest.raises(TraceError, match=match):
        trace(out, make(model))


@pytest.mark.parametrize("max_nodes", [0, -1, -100])
def test_max_nodes_below_one(max_nodes: int) -> None:
    with pytest.raises(TraceError, match=f"max_nodes must be a positive number of nodes, got {max_nodes}"):
        trace((_x() * 2).sum(), max_nodes=max_nodes)


@pytest.mark.parametrize("rankdir", ["XY", "tb", "", "TOP"])
def test_bad_rankdir(rankdir: str) -> None:
    with pytest.raises(RenderError, match=f"rankdir must be one of TB, BT, LR, RL, got {rankdir!r}"):
        render(_seed_graph(), rankdir=rankdir)


@pytest.mark.parametrize("name", ["graph.jpg", "graph", "graph.svgz", "graph.dot.txt"])
def test_save_with_an_unsupported_suffix(tmp_path: Path, name: str) -> None:
    suffix = Path(name).suffix
    with pytest.raises(
        UnsupportedFormatError, match=f"from its suffix '{suffix}': end the name in one of .svg, .png"
    ):
        save(_seed_graph(), tmp_path / name)
    assert list(tmp_path.iterdir()) == []  # validated before anything is written


@pytest.mark.parametrize("fmt", ["gif", "jpeg", "htm"])
def test_export_an_unsupported_format(fmt: str) -> None:
    with pytest.raises(UnsupportedFormatError, match=f"cannot write format '{fmt}': choose one of svg, png, .*html"):
        export(_seed_graph(), fmt)


def test_save_into_a_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(RenderError, match="cannot write .*missing.*No such file or directory"):
        save(_seed_graph(), tmp_path / "missing" / "graph.dot")


INSTALL_HINT = r"'dot' program was not found on PATH.*apt-get install graphviz.*brew install graphviz.*conda install"


@pytest.mark.usefixtures("no_dot")
@pytest.mark.parametrize("suffix", ["svg", "png", "pdf"])
def test_missing_dot_names_how_to_install_it(tmp_path: Path, suffix: str) -> None:
    graph = _seed_graph()
    with pytest.raises(DotNotFoundError, match=INSTALL_HINT):
        save(graph, tmp_path / f"graph.{suffix}")
    with pytest.raises(DotNotFoundError, match=INSTALL_HINT):
        export(graph, suffix)


@pytest.mark.usefixtures("no_dot")
def test_missing_dot_in_notebook_display_leaves_out_the_svg_only() -> None:
    bundle = _seed_graph()._repr_mimebundle_()  # the interactive viewer needs no layout program
    assert "text/html" in bundle and "image/svg+xml" not in bundle


@pytest.mark.usefixtures("no_dot")
@pytest.mark.parametrize("suffix", ["dot", "json"])
def test_dot_and_json_need_no_dot_program(tmp_path: Path, suffix: str) -> None:
    graph = _seed_graph()
    path = save(graph, tmp_path / f"graph.{suffix}")
    text = path.read_text()
    assert text == (render(graph).source if suffix == "dot" else graph.to_json(indent=1))


SCHEMA = [
    ("newer version", json.dumps({"schema": 4, "nodes": [], "edges": []}),
     'expected a graph with "schema": 1, 2 or 3, found 4'),
    ("compact without columns", json.dumps({"schema": 3, "nodes": [], "edges": []}), "malformed compact graph JSON"),
    ("no version", json.dumps({"nodes": [], "edges": []}), 'expected a graph with "schema": 1, 2 or 3, found None'),
    ("a boolean version", json.dumps({"schema": True, "nodes": [], "edges": []}),
     'expected a graph with "schema": 1, 2 or 3, found True'),
    ("a list", "[1, 2]", 'expected a graph with "schema": 1, 2 or 3, found None'),
    ("not JSON", "digraph { a -> b }", "not JSON: Expecting value"),
    ("empty", "", "not JSON"),
    ("no nodes", json.dumps({"schema": 1, "edges": []}), "the graph has no 'nodes' field"),
    ("bad kind", json.dumps({"schema": 1, "nodes": [{"id": "n0", "kind": "blob", "name": "x"}], "edges": []}),
     r"nodes\[0\] holds the wrong kind of value \(ValueError: 'blob' is not a valid NodeKind"),
    ("short edge", json.dumps({"schema": 1, "nodes": [], "edges": [["n0", "n1"]]}),
     r"edges\[0\] holds the wrong kind of value"),
    ("long edge", json.dumps({"schema": 2, "nodes": [], "edges": [["n0", "n1", "data", 0, 0, None, 1]]}),
     "an edge has 5 or 6 fields, found 7"),
]


@pytest.mark.parametrize(("text", "match"), [c[1:] for c in SCHEMA], ids=[c[0] for c in SCHEMA])
def test_from_json_rejects_what_is_not_a_graph(text: str, match: str) -> None:
    with pytest.raises(SchemaError, match=match):
        Graph.from_json(text)


def test_node_lookup_names_the_missing_id() -> None:
    with pytest.raises(KeyError, match="no node 'n99' in this graph"):
        _seed_graph().node("n99")


@pytest.mark.parametrize(
    ("error", "bases"),
    [
        (NoGradFnError, (TraceError, ValueError, GraphvizAppError)),
        (DotNotFoundError, (RenderError, RuntimeError, GraphvizAppError)),
        (UnsupportedFormatError, (RenderError, ValueError, GraphvizAppError)),
        (SchemaError, (ValueError, GraphvizAppError)),
    ],
)
def test_errors_can_be_caught_by_their_family(error: type, bases: tuple[type, ...]) -> None:
    assert all(issubclass(error, base) for base in bases)
