"""A saved graph is checked field by field on read: each wrongly typed file is a SchemaError naming the field,
through `Graph.from_json`, the CLI's reader and the page's upload alike."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from saved_graphs import every_field_graph

from graphviz_app.cli.saved import load_saved_graph
from graphviz_app.errors import SchemaError
from graphviz_app.model import Edge, Graph, Node, NodeKind
from graphviz_app.model.compact import to_compact
from graphviz_app.web.upload import read_saved_graph


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """A change to a schema-2 dict: `path` is keys and indexes joined by '/'."""
    def change(data: dict[str, Any]) -> None:
        *parents, last = [int(p) if p.isdigit() else p for p in path.split("/")]
        target: Any = data
        for p in parents:
            target = target[p]
        target[last] = value
    return change


def _append_edge(row: list[Any]) -> Callable[[dict[str, Any]], None]:
    return lambda data: data["edges"].append(row)


# (case, change to a valid schema-2 dict, words the SchemaError must hold)
SCHEMA2 = [
    ("truncated as text", _set("truncated", "no"), "truncated holds the wrong kind of value: expected true or false"),
    ("a number as a name", _set("nodes/1/name", 5), "nodes[1] ('n1').name holds the wrong kind of value"),
    ("a shape as text", _set("nodes/0/tensor/shape", "abc"), "nodes[0] ('n0').tensor.shape"),
    ("bytes as text", _set("nodes/0/tensor/bytes", "12"), "nodes[0] ('n0').tensor.bytes holds the wrong kind"),
    ("negative bytes", _set("nodes/0/tensor/bytes", -1), "tensor.bytes"),
    ("a dimension past int64", _set("nodes/0/tensor/shape", [2**70]), "tensor.shape"),
    ("a bool as numel", _set("nodes/0/tensor/numel", True), "tensor.numel"),
    ("requires_grad as text", _set("nodes/0/tensor/requires_grad", "yes"), "tensor.requires_grad"),
    ("given as a number", _set("nodes/0/tensor/given", 1), "tensor.given"),
    ("an attribute not text", _set("nodes/1/attrs", [["other", 2]]), "nodes[1] ('n1').attrs"),
    ("a module as a number", _set("nodes/1/module", 3), "nodes[1] ('n1').module"),
    ("a gradient norm as text", _set("nodes/1/grad/norm", "big"), "nodes[1] holds the wrong kind of value"),
    ("a gradient count as text", _set("nodes/1/grad/nan", "0"), "nodes[1] ('n1').grad.nan"),
    ("an unknown kind", _set("nodes/1/kind", "blob"), "'blob' is not a valid NodeKind"),
    ("an empty id", _set("nodes/2/id", ""), "nodes[2] ('').id"),
    ("an id twice", _set("nodes/2/id", "n1"), "nodes[2] ('n1').id: the id 'n1' is used by an earlier node too"),
    ("an edge to nowhere", _append_edge(["n2", "n9", "data", 0, 0]), "edges[2].dst: no node has the id 'n9'"),
    ("an edge from a number", _append_edge([1, "n0", "data", 0, 0]), "edges[2].src holds the wrong kind"),
    ("a negative slot", _append_edge(["n2", "n0", "data", 0, -1]), "edges[2].slot"),
    ("an unknown edge kind", _append_edge(["n2", "n0", "wire", 0, 0]), "edges[2] holds the wrong kind of value"),
    ("a 2-cycle", _append_edge(["n0", "n1", "data", 0, 0]), "edges: they go round in a cycle (n0 -> n1 -> n0)"),
    ("a self-loop", _append_edge(["n2", "n2", "data", 0, 0]), "cycle (n2 -> n2)"),
    ("a module twice", _set("modules/1/0", ""), "modules[1]: the module '' is listed twice"),
    ("module params as text", _set("modules/1/2", "6"), "modules[1].params"),
    ("a note as a number", _set("notes/0", 7), "notes[0] holds the wrong kind of value: expected text"),
    ("an origin not in the graph", _set("nonfinite_origin", "n7"), "nonfinite_origin: no node has the id 'n7'"),
    ("a region of no node", _set("regions/0/node", "n8"), "regions[0].node: no node has the id 'n8'"),
    ("a region input of no op", _set("regions/0/inputs/0/1", "zz"), "regions[0].inputs[0]"),
    ("a region slot as text", _set("regions/0/inputs/0/0", "0"), "regions[0].inputs[0]"),
    ("nodes not a list", _set("nodes", {"n0": 1}), "nodes holds the wrong kind of value: expected a list"),
    ("a node not an object", _set("nodes/0", 1), "nodes[0] holds the wrong kind of value: expected an object"),
]


def _mutated(change: Callable[[dict[str, Any]], None]) -> str:
    data = copy.deepcopy(every_field_graph().to_dict())
    change(data)
    return json.dumps(data)


def test_the_unchanged_file_reads_back_exactly() -> None:
    graph = every_field_graph()
    assert Graph.from_json(graph.to_json()) == graph
    assert Graph.from_dict(to_compact(graph)) == graph


@pytest.mark.parametrize(("change", "words"), [c[1:] for c in SCHEMA2], ids=[c[0] for c in SCHEMA2])
def test_a_wrongly_typed_field_is_named(change: Callable[[dict[str, Any]], None], words: str) -> None:
    with pytest.raises(SchemaError) as found:
        Graph.from_json(_mutated(change))
    assert words in str(found.value)


# (case, JSON text, words): what is not strict JSON, or not readable at all
TEXTS = [
    ("NaN", '{"schema": 2, "nodes": [], "edges": [], "x": NaN}', "NaN is not JSON"),
    ("Infinity in a shape", json.dumps(every_field_graph().to_dict()).replace("[2, 3]", "[Infinity, 3]", 1),
     "Infinity is not JSON"),
    ("-Infinity", '{"schema": 2, "nodes": [], "edges": [], "x": -Infinity}', "-Infinity is not JSON"),
    ("a float too large", '{"schema": 2, "nodes": [], "edges": [], "x": 1e999}', "too large for a float"),
    ("a key twice", '{"schema": 2, "nodes": [], "nodes": [], "edges": []}', "the key 'nodes' appears twice"),
    ("deep nesting", "[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ("5,000 digits", '{"schema": ' + "9" * 5000 + "}", "too long to read"),
    ("not JSON", "digraph { a -> b }", "not JSON"),
]


@pytest.mark.parametrize(("text", "words"), [c[1:] for c in TEXTS], ids=[c[0] for c in TEXTS])
def test_what_is_not_strict_json_is_a_schema_error(text: str, words: str) -> None:
    with pytest.raises(SchemaError) as found:
        Graph.from_json(text)
    assert words in str(found.value)


def _compact_set(column: str, field: str, index: int, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        data[column][field][index] = value
    return change


COMPACT = [
    ("Infinity-free but huge shape", _compact_set("tensors", "shape", 0, [2**70, 3]), "tensor.shape"),
    ("bytes as text", _compact_set("tensors", "bytes", 0, "12"), "tensor.bytes"),
    ("requires_grad as 2", _compact_set("tensors", "requires_grad", 0, 2), "requires_grad holds 2"),
    ("an edge slot as text", _compact_set("edges", "slot", 0, "0"), "edges[0].slot"),
    ("a shape as text", _compact_set("tensors", "shape", 0, "abc"), "tensor.shape"),
]


@pytest.mark.parametrize(("change", "words"), [c[1:] for c in COMPACT], ids=[c[0] for c in COMPACT])
def test_a_wrongly_typed_compact_column_is_named(change: Callable[[dict[str, Any]], None], words: str) -> None:
    data = to_compact(every_field_graph())
    change(data)
    with pytest.raises(SchemaError) as found:
        Graph.from_json(json.dumps(data))
    assert words in str(found.value)


def test_compact_truncated_as_text_is_refused() -> None:
    data = {**to_compact(every_field_graph()), "truncated": "no"}
    with pytest.raises(SchemaError, match="truncated holds the wrong kind of value"):
        Graph.from_dict(data)


@pytest.mark.parametrize("case", [SCHEMA2[0], SCHEMA2[3], SCHEMA2[15], SCHEMA2[20]], ids=lambda c: c[0])
def test_the_cli_and_the_page_give_the_same_named_field(tmp_path: Path, case: tuple[Any, ...]) -> None:
    _, change, words = case
    text = _mutated(change)
    path = tmp_path / "g.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SchemaError) as cli:
        load_saved_graph(path)
    with pytest.raises(SchemaError) as page:
        read_saved_graph(text.encode(), "g.json")
    assert words in str(cli.value) and words in str(page.value)


@pytest.mark.parametrize(("text", "words"), [c[1:] for c in TEXTS[:5]], ids=[c[0] for c in TEXTS[:5]])
def test_the_page_refuses_what_is_not_strict_json(text: str, words: str) -> None:
    with pytest.raises(SchemaError) as found:
        read_saved_graph(text.encode(), "g.json")
    assert words in str(found.value) and str(found.value).startswith("g.json")


def test_a_graph_of_many_nodes_is_checked_without_recursion() -> None:
    n = 20_000
    nodes = tuple(Node(f"n{i}", NodeKind.OP, "MulBackward0") for i in range(n))
    edges = tuple(Edge(f"n{i + 1}", f"n{i}") for i in range(n - 1))
    chain = Graph(nodes, edges)
    assert Graph.from_json(chain.to_json()) == chain
    looped = chain.to_dict()
    looped["edges"].append(["n0", f"n{n - 1}", "data", 0, 0])
    with pytest.raises(SchemaError, match=r"cycle \(n0 -> n19999 -> n19998 -> .* -> \.\.\.\)"):
        Graph.from_dict(looped)
