"""The tracer's fast record constructors make the model's own frozen records."""

from __future__ import annotations

import dataclasses

import pytest

from graphviz_app.model import Edge, EdgeKind, Graph, Node, NodeKind, TensorInfo
from graphviz_app.tracing import fast_records as _records

INFO_ARGS = ("w", (2,), "float32", "cpu", 2, 8, True, (0.5, "nan"), "s0")


def test_the_fast_path_is_on_for_this_model() -> None:
    # Off, tracing stays right but loses its fastest constructors: the
    # model's fields no longer match the ones _records.py writes out.
    assert _records.FAST


@pytest.mark.parametrize(
    ("fast", "cls", "args"),
    [
        (_records.new_tensor_info, TensorInfo, INFO_ARGS),
        (_records.new_node, Node, ("n1", NodeKind.LEAF, "w", TensorInfo(*INFO_ARGS))),
        (_records.new_node, Node, ("n2", NodeKind.OP, "MulBackward0", None, (("other", "2"),))),
        (_records.new_edge, Edge, ("n1", "n2")),
        (_records.new_edge, Edge, ("n3", "n2", EdgeKind.SAVED, 1, 2)),
    ],
)
def test_fast_records_equal_hash_and_stay_frozen_like_the_class(fast: object, cls: type, args: tuple) -> None:
    made, expected = fast(*args), cls(*args)  # type: ignore[operator]
    assert type(made) is cls
    assert made == expected and hash(made) == hash(expected) and repr(made) == repr(expected)
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(made, dataclasses.fields(cls)[0].name, "changed")


def test_a_graph_of_fast_records_round_trips_through_json() -> None:
    info = _records.new_tensor_info(*INFO_ARGS)
    graph = Graph(
        (
            _records.new_node("n0", NodeKind.OUTPUT, "output", info),
            _records.new_node("n1", NodeKind.OP, "AddBackward0"),
        ),
        (_records.new_edge("n1", "n0"),),
    )
    assert Graph.from_json(graph.to_json()) == graph
