"""The plain model: JSON round trip, golden JSON, summaries, and no reference to torch objects."""

from __future__ import annotations

import dataclasses
import gc
import json
import math
import weakref
from enum import Enum
from typing import Any

import pytest
import torch
from core_corpus import CORPUS, build
from core_golden import assert_golden, golden_graphs
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from graphviz_app import Graph, trace
from graphviz_app.model import NodeKind, Summary, human_bytes


def _strict_json(text: str) -> Any:
    def reject(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=reject)


@pytest.mark.parametrize("name", list(CORPUS))
def test_json_round_trip_of_the_corpus(name: str) -> None:
    case = build(name)
    graph = trace(case.outputs, case.params)
    text = graph.to_json()
    back = Graph.from_json(text)
    assert back == graph and hash(back) == hash(graph)
    assert _strict_json(text)["schema"] == 2
    assert Graph.from_json(graph.to_json(indent=2)) == graph


@pytest.mark.slow  # the first meta op of a process loads torch's meta kernels: seconds
def test_json_round_trip_after_backward_and_across_devices() -> None:
    x = torch.arange(3.0, requires_grad=True)
    y = (x.to("meta") * 2).sum() + (x * x).sum()
    (x * x).sum().backward()
    freed = (x * x).sum()
    freed.backward()
    for graph in (trace(y), trace(freed)):
        assert Graph.from_json(graph.to_json()) == graph


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(width=32), min_size=1, max_size=16))
def test_json_round_trip_of_any_float_values(values: list[float]) -> None:
    """nan and inf included: the JSON stays standard and the graph equal."""
    x = torch.tensor(values, requires_grad=True)
    graph = trace((x * 2).sum())
    text = graph.to_json()
    _strict_json(text)
    assert Graph.from_json(text) == graph
    (leaf,) = graph.of_kind(NodeKind.LEAF)
    shown = [v if isinstance(v, float) else float(v) for v in leaf.tensor.values]
    assert all((math.isnan(a) and math.isnan(b)) or a == b for a, b in zip(shown, values, strict=True))


@pytest.mark.parametrize("name", list(golden_graphs()))
def test_golden_json(name: str) -> None:
    outputs, params = golden_graphs()[name]()
    assert_golden(f"{name}.json", trace(outputs, params).to_json(indent=1) + "\n")


def _xx() -> Any:
    x = torch.arange(3.0, requires_grad=True)
    return (x * x).sum()  # saves x as self and as other: one storage


def _xy() -> Any:
    x, y = torch.ones(3, requires_grad=True), torch.ones(3, requires_grad=True)
    return (x * y).sum()


def _exp64() -> Any:
    x = torch.ones(4, dtype=torch.float64, requires_grad=True)
    return x.exp().sum()  # saves its result: 4 float64


def _after_backward() -> Any:
    y = _xx()
    y.backward()
    return y


def _seed() -> Any:
    return build("seed_example").outputs


SUMMARIES = [
    ("x*x saves the leaf x: no activation", _xx, 6, 6, {"leaf": 1, "op": 2, "output": 1, "saved": 2},
     ("float32",), 0, 12),
    ("x*y saves two leaves", _xy, 7, 6, {"leaf": 2, "op": 2, "output": 1, "saved": 2}, ("float32",), 0, 24),
    ("exp saves its result", _exp64, 5, 4, {"leaf": 1, "op": 2, "output": 1, "saved": 1}, ("float64",), 32, 32),
    ("seed example", _seed, 7, 6, {"leaf": 1, "op": 4, "output": 1, "saved": 1}, ("float32",), 12, 12),
    ("freed by backward", _after_backward, 6, 6, {"leaf": 1, "op": 2, "output": 1, "saved": 2}, ("float32",), 0, 12),
]


@pytest.mark.parametrize(
    ("make", "nodes", "edges", "by_kind", "dtypes", "activations", "params"),
    [s[1:] for s in SUMMARIES],
    ids=[s[0] for s in SUMMARIES],
)
def test_summary_of_known_graphs(
    make: Any, nodes: int, edges: int, by_kind: dict[str, int], dtypes: tuple[str, ...],
    activations: int, params: int,
) -> None:
    summary = trace(make()).summary()
    assert (summary.nodes, summary.edges) == (nodes, edges)
    assert dict(summary.nodes_by_kind) == by_kind
    assert summary.devices == ("cpu",) and summary.dtypes == dtypes
    assert (summary.activations_total, summary.params_total) == (activations, params)


def test_summary_reads_as_one_line() -> None:
    summary = trace(_exp64()).summary()
    assert str(summary) == (
        "5 nodes, 4 edges, activations held 32 B, parameters referenced 32 B, devices: cpu"
    )
    assert summary.edges_by_kind == (("data", 3), ("saved", 1))
    empty = Summary(0, 0, (), (), (), ())
    assert str(empty) == "0 nodes, 0 edges, activations held 0 B, parameters referenced 0 B, devices: none"


@pytest.mark.parametrize(
    ("n", "text"),
    [(0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (1536, "1.5 KiB"), (5 * 1024**2, "5.0 MiB"),
     (3 * 1024**3, "3.0 GiB"), (4096 * 1024**3, "4096.0 GiB")],
)
def test_human_bytes(n: int, text: str) -> None:
    assert human_bytes(n) == text


def _plain_values(value: Any, path: str = "graph") -> list[str]:
    """Paths of anything in `value` that is not plain data (str, number, bool, None, enum)."""
    if value is None or isinstance(value, (str, int, float, bool, Enum)):
        return []
    if isinstance(value, tuple):
        return [p for i, v in enumerate(value) for p in _plain_values(v, f"{path}[{i}]")]
    if dataclasses.is_dataclass(value):
        return [
            p for f in dataclasses.fields(value) for p in _plain_values(getattr(value, f.name), f"{path}.{f.name}")
        ]
    return [f"{path}: {type(value).__name__}"]


@pytest.mark.parametrize("name", list(CORPUS))
def test_a_graph_holds_only_plain_data(name: str) -> None:
    case = build(name)
    assert _plain_values(trace(case.outputs, case.params)) == []


@pytest.mark.parametrize("show_saved", [True, False])
def test_tracing_keeps_no_tensor_alive(show_saved: bool) -> None:
    x = torch.randn(3, requires_grad=True)
    y = (x * x).exp().sum()
    saved = y.grad_fn.next_functions[0][0]._saved_result  # a tensor the graph saved
    refs = [weakref.ref(t) for t in (x, y, saved)]
    graph = trace(y, {"x": x}, show_saved=show_saved)
    del x, y, saved
    gc.collect()
    assert [r() for r in refs] == [None, None, None]
    assert graph.of_kind(NodeKind.LEAF)[0].name == "x"  # the graph is still whole


def test_tracing_a_model_keeps_no_parameter_alive() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    out = model(torch.randn(3, 4)).sum()
    refs = [weakref.ref(model)] + [weakref.ref(p) for p in model.parameters()]
    graph = trace(out, model.named_parameters())
    del model, out
    gc.collect()
    assert all(r() is None for r in refs)
    assert len(graph.of_kind(NodeKind.LEAF)) == 4


def test_schema_1_files_still_load() -> None:
    """A file written before modules and gradients existed reads as the same graph."""
    x = torch.arange(3.0, requires_grad=True)
    graph = trace(((x + 2) ** 2 + 3).mean(), {"x": x})
    old = graph.to_dict()
    old["schema"] = 1
    assert Graph.from_dict(old) == graph


def test_module_source_and_gradients_survive_json() -> None:
    from graphviz_app.model import Edge, EdgeKind, GradInfo, ModuleInfo, Node

    grad = GradInfo(numel=3, norm=3.5, max_abs=2.0, mean_abs=1.0, nan=1, inf=0,
                    zero_fraction=0.0, values=(1.0, "nan", 2.0))
    graph = Graph(
        nodes=(
            Node("n0", NodeKind.OP, "AddmmBackward0", module="layers.0", source="m.py:3 in forward", grad=grad),
            Node("n1", NodeKind.LEAF, "layers.0.weight", module="layers.0"),
        ),
        edges=(Edge("n1", "n0", EdgeKind.DATA, 0, 1, grad),),
        modules=(ModuleInfo("", "Net", 12, 48), ModuleInfo("layers.0", "Linear", 12, 48)),
        nonfinite_origin="n0",
    )
    text = graph.to_json()
    _strict_json(text)
    assert Graph.from_json(text) == graph
    assert not grad.finite
