"""collapse(depth=...): deep modules become one box each, with their facts and their border edges."""

from __future__ import annotations

import pytest
from mv_graphs import LAYER_PARTS, encoder_graph, tensor

from graphviz_app.analysis.collapse import NO_MODULES_NOTE, collapse
from graphviz_app.errors import CollapseError
from graphviz_app.model import Edge, EdgeKind, Graph, ModuleInfo, Node, NodeKind

PER_LAYER_BOXES = len({p for p, _ in LAYER_PARTS if p})  # self_attn, dropout1, norm1, linear1, linear2, norm2
PER_LAYER_OWN_OPS = sum(1 for p, _ in LAYER_PARTS if not p)  # the residual adds and the relu


def _boxes(graph: Graph) -> list[Node]:
    return [n for n in graph.nodes if n.kind is NodeKind.MODULE]


@pytest.mark.parametrize(
    ("depth", "expected_nodes"),
    [
        # output, mean, input leaf; then per layer: boxes + own ops + a saved tensor per own op
        (2, 3 + 100 * (PER_LAYER_BOXES + 2 * PER_LAYER_OWN_OPS)),
        (1, 3 + 100),  # each layer is one box
        (0, 3 + 1),  # "layers" is one box
    ],
)
def test_a_100_layer_encoder_has_one_box_per_module_deeper_than_depth(depth: int, expected_nodes: int) -> None:
    graph = collapse(encoder_graph(100), depth=depth)
    assert len(graph.nodes) == expected_nodes
    assert all(n.module.count(".") + 1 == depth + 1 for n in _boxes(graph) if n.module)


def test_depth_deeper_than_every_module_changes_nothing_and_says_so() -> None:
    graph = encoder_graph(3)
    folded = collapse(graph, depth=5)
    assert (folded.nodes, folded.edges) == (graph.nodes, graph.edges)
    assert folded.notes == (*graph.notes, "depth=5 folds nothing: the deepest module with ops is at depth 3 "
                            "('layers.2.self_attn'); depth=2 draws the modules at depth 3 as boxes")
    assert collapse(graph) is graph


def test_a_box_names_its_module_and_carries_its_facts() -> None:
    graph = collapse(encoder_graph(2), depth=1)
    box = next(n for n in graph.nodes if n.module == "layers.0")
    facts = dict(box.attrs)
    assert box.name == "layers.0: TransformerEncoderLayer"
    assert facts["type"] == "TransformerEncoderLayer"
    assert facts["ops"] == str(len(LAYER_PARTS))
    assert facts["activations"] == f"{32 * len(LAYER_PARTS)} B"  # one (2, 4) float32 saved input per op
    assert facts["params"] == "140 (560 B)"


def test_saved_tensors_sharing_a_storage_count_once_in_a_box() -> None:
    nodes = (
        Node("n0", NodeKind.OP, "MulBackward0", tensor(), module="block"),
        Node("n1", NodeKind.SAVED, "self", tensor(storage="s0")),
        Node("n2", NodeKind.SAVED, "other", tensor(storage="s0")),  # the same memory, saved twice
        Node("n3", NodeKind.SAVED, "result", tensor((8, 8), storage="s1")),
    )
    edges = (Edge("n1", "n0", EdgeKind.SAVED), Edge("n2", "n0", EdgeKind.SAVED), Edge("n3", "n0", EdgeKind.SAVED))
    box = collapse(Graph(nodes, edges), depth=0).nodes[0]
    assert dict(box.attrs)["activations"] == f"{32 + 256} B"


def test_edges_crossing_a_border_are_kept_once_and_inside_edges_dropped() -> None:
    # x feeds two ops inside "attn" (slots 0 and 1) and one outside; attn's two ops both feed "out".
    nodes = (
        Node("n0", NodeKind.OP, "AddBackward0", module="out"),
        Node("n1", NodeKind.OP, "MulBackward0", module="attn"),
        Node("n2", NodeKind.OP, "ExpBackward0", module="attn"),
        Node("n3", NodeKind.OP, "NegBackward0", module=None),
        Node("n4", NodeKind.LEAF, "x"),
    )
    edges = (
        Edge("n1", "n0", slot=0), Edge("n2", "n0", slot=1), Edge("n2", "n1", slot=0),
        Edge("n4", "n1", slot=1), Edge("n4", "n2"), Edge("n4", "n3"), Edge("n3", "n0", slot=2),
    )
    graph = collapse(Graph(nodes, edges), depth=0)
    pairs = [(e.src, e.dst) for e in graph.edges]
    assert sorted(pairs) == sorted([
        ("module/attn", "module/out"), ("n4", "module/attn"), ("n4", "n3"), ("n3", "module/out"),
    ])
    assert len(pairs) == len(set(pairs))


def test_leaves_go_into_the_box_of_the_module_owning_the_parameter() -> None:
    graph = collapse(encoder_graph(2), depth=2)
    leaves = [n.name for n in graph.nodes if n.kind is NodeKind.LEAF]
    assert leaves == ["x"]  # every weight sits in its module's box


def test_expanded_opens_a_box_one_level_deeper() -> None:
    full = encoder_graph(3)
    closed = collapse(full, depth=1)
    opened = collapse(full, depth=1, expanded=frozenset({"layers.1"}))
    assert [n.module for n in _boxes(closed)] == ["layers.2", "layers.1", "layers.0"]
    assert {n.module for n in _boxes(opened)} == {"layers.2", "layers.0"} | {
        f"layers.1.{p}" for p, _ in LAYER_PARTS if p
    }


def test_without_module_information_the_graph_is_unchanged_but_for_a_note_saying_how() -> None:
    plain = Graph((Node("n0", NodeKind.OP, "AddBackward0"),), ())
    graph = collapse(plain, depth=1, roll=True)
    assert graph.nodes == plain.nodes
    assert graph.notes == (NO_MODULES_NOTE,)
    assert "with record(model):" in NO_MODULES_NOTE and "trace_model" in NO_MODULES_NOTE
    assert collapse(graph, depth=1).notes == (NO_MODULES_NOTE,)  # said once


def test_a_collapsed_graph_round_trips_through_json_and_is_hashable() -> None:
    graph = collapse(encoder_graph(4), depth=2, roll=True)
    assert Graph.from_json(graph.to_json()) == graph
    assert hash(graph) == hash(Graph.from_json(graph.to_json()))


def test_modules_missing_from_graph_modules_still_collapse_without_a_type() -> None:
    graph = Graph((Node("n0", NodeKind.OP, "AddBackward0", module="a.b"),), (), modules=(ModuleInfo("", "Net"),))
    box = collapse(graph, depth=0).nodes[0]
    assert (box.name, box.module, dict(box.attrs)["ops"]) == ("a", "a", "1")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"depth": -1}, r"depth must be a whole number >= 0 .* got -1"),
        ({"depth": 1.5}, r"depth must be a whole number >= 0 .* got 1.5"),
        ({"depth": True}, r"depth must be a whole number >= 0 .* got True"),
        ({"depth": 1, "expanded": "layers.0"}, r"expanded must be a set of module names, e\.g\. frozenset"),
        ({"depth": 1, "expanded": {3}}, r"expanded must hold module names \(str\), got \['3'\]"),
    ],
)
def test_bad_options_say_what_was_expected(options: dict, message: str) -> None:
    with pytest.raises(CollapseError, match=message):
        collapse(encoder_graph(1), **options)


def test_a_box_of_a_graph_traced_without_saved_tensors_says_not_traced_not_0_bytes() -> None:
    box = collapse(encoder_graph(1, saved=False), depth=1).nodes[2]
    assert box.module == "layers.0"
    assert dict(box.attrs)["activations"] == "not traced"
