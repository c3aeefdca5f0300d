"""A graph carries a model check's verdicts through JSON (both schemas), checked field by field; old files load."""

from __future__ import annotations

import dataclasses
import json

import pytest
from viewer_support import checked_graph, module_graph

from graphviz_app.errors import SchemaError
from graphviz_app.model import Graph, to_compact
from graphviz_app.model.checks import Status, UnitKind, Verdict


def test_the_verdicts_travel_through_json_and_the_compact_form() -> None:
    graph = dataclasses.replace(checked_graph(), checks=checked_graph().checks + (
        Verdict("head", UnitKind.DETACH, "Head", ".detach()", "model.py:3", Status.DETACHED, rel_error=float("inf"),
                notes=("a", "b"), checks=("rev",)),))
    back = Graph.from_json(graph.to_json())
    assert back.checks == graph.checks
    assert Graph.from_json(graph.to_json(indent=1)).checks == graph.checks
    assert Graph.from_dict(to_compact(graph)).checks == graph.checks
    assert json.loads(graph.to_json())["checks"][-1]["rel_error"] == "inf"  # strict JSON


def test_a_graph_without_a_check_writes_what_it_wrote_before_and_old_files_load() -> None:
    plain = module_graph(2)
    data = plain.to_dict()
    assert "checks" not in data and "checks" not in to_compact(plain)
    assert Graph.from_dict(data).checks == ()


@pytest.mark.parametrize(("field", "value", "message"), [
    ("status", "fine", r"checks\[0\]\.status holds the wrong kind of value: expected one of passed, failed"),
    ("kind", "layer", r"checks\[0\]\.kind holds the wrong kind of value: expected one of module, function"),
    ("culprit", "yes", r"checks\[0\]\.culprit holds the wrong kind of value: expected true or false"),
    ("ratio", "big", r"a check verdict's ratio: a gradient statistic must be a number"),
    ("parent", 99, r"checks\[0\]\.parent: there is no verdict 99"),
    ("notes", [3], r"checks\[0\]\.notes holds the wrong kind of value: expected a list of text"),
    ("colour", "red", r"a check verdict has unknown field\(s\) colour"),
])
def test_a_changed_verdict_is_refused_naming_the_field(field: str, value: object, message: str) -> None:
    data = checked_graph().to_dict()
    data["checks"][0][field] = value
    with pytest.raises(SchemaError, match=message):
        Graph.from_dict(data)


def test_a_verdict_missing_a_field_is_refused() -> None:
    data = checked_graph().to_dict()
    del data["checks"][0]["status"]
    with pytest.raises(SchemaError, match="a check verdict lacks a field it needs: .*.status."):
        Graph.from_dict(data)


def test_the_summary_and_the_module_table_show_the_verdicts() -> None:
    graph = checked_graph()
    text = str(graph.summary())
    assert text.endswith("; model check: 3 passed, 3 failed, 1 not checked; blocks.1.fc (Linear.forward, "
                         "model.py:11): backward is 1.02 x finite differences for the input input")
    rows = {r.module: r.check for r in graph.module_summary()}
    assert rows["blocks.1.fc"] == "culprit: 1.02 x (input input)"
    assert rows["blocks.1"] == "fails inside (blocks.1.fc)" and rows["blocks.2"] == "not checked"
    assert rows["blocks.2.fc"] is None  # no verdict: the table shows "-"
    table = str(graph.module_summary()).splitlines()
    assert table[0].split()[-1] == "check"
    assert next(line for line in table if line.startswith("blocks.1.fc ")).endswith("culprit: 1.02 x (input input)")
    assert "check" not in str(module_graph(2).module_summary()) and "model check" not in str(module_graph(2).summary())
