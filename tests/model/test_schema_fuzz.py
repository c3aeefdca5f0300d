"""Reading a mutated saved graph either gives a graph or raises SchemaError: never OverflowError, RecursionError,
KeyError, TypeError or a plain ValueError (seeded mutations of schema 2 and the compact schema 3)."""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import pytest
from saved_graphs import every_field_graph

from graphviz_app.errors import SchemaError
from graphviz_app.model import Graph
from graphviz_app.model.compact import to_compact

HOSTILE: list[Any] = [
    None, True, False, 0, -1, 1.5, -0.0, 2**63, -(2**70), 10**300, 1e308, "", "x", "12", "nan", "inf", "-1",
    "n0", "n1", [], [1], ["a", "b"], [[1, 2]], {}, {"a": 1}, [None] * 7, "\ud800", "\x00", [[[[[]]]]],
]


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for k, v in value.items():
            found += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += _paths(v, (*prefix, i))
    return found


def _mutate(data: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    data = copy.deepcopy(data)
    for _ in range(rng.randint(1, 3)):
        path = rng.choice(_paths(data))
        target = data
        for p in path[:-1]:
            target = target[p]
        if rng.random() < 0.1 and isinstance(target, dict):
            target.pop(path[-1], None)
        else:
            target[path[-1]] = copy.deepcopy(rng.choice(HOSTILE))
    return data


@pytest.mark.parametrize("form", ["schema 2", "compact"])
def test_every_mutation_reads_or_is_a_schema_error(form: str) -> None:
    # through JSON text, as a reader meets it: the columns hold the records' tuples, which JSON writes as arrays
    graph = every_field_graph()
    base = graph.to_dict() if form == "schema 2" else json.loads(json.dumps(to_compact(graph)))
    rng = random.Random(30)
    outcomes = {"read": 0, "refused": 0}
    for _ in range(400):
        text = json.dumps(_mutate(base, rng))
        try:
            Graph.from_json(text)
            outcomes["read"] += 1
        except SchemaError:
            outcomes["refused"] += 1
    assert outcomes["refused"] > 200  # most mutations break a type or a reference, and each is refused by name


def test_what_reads_also_draws() -> None:
    """A mutated file that passes the check is one the drawing and the viewer take (DOT, HTML)."""
    from graphviz_app.drawing.renderer import export

    rng = random.Random(31)
    base = every_field_graph().to_dict()
    drawn = 0
    for _ in range(300):
        try:
            graph = Graph.from_json(json.dumps(_mutate(base, rng)))
        except SchemaError:
            continue
        assert export(graph, "dot").startswith(b"digraph") and export(graph, "html").startswith(b"<!DOCTYPE html>")
        drawn += 1
    assert drawn >= 20
