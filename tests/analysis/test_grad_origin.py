"""Graph.nonfinite_origin names the op where NaN/Inf is born, and stays None when it is not."""

from __future__ import annotations

import warnings

import pytest
from grad_corpus import FINITE, NONFINITE

from graphviz_app import trace
from graphviz_app.analysis.gradient_report import gradient_summary


def _traced(make):  # type: ignore[no-untyped-def]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # std() of one sample warns
        case = make()
        return trace(case.outputs, case.params, gradients=True)


@pytest.mark.parametrize("program", sorted(NONFINITE))
def test_origin_is_the_op_that_creates_the_nan(program: str) -> None:
    make, op, forward_bad = NONFINITE[program]
    graph = _traced(make)
    assert graph.nonfinite_origin is not None, f"{program}: no origin found"
    origin = graph.node(graph.nonfinite_origin)
    assert origin.name == op
    note = next(n for n in graph.notes if "first appears in backward" in n)
    assert f"at {op} ({origin.id}), input slot " in note
    assert f"shape {origin.tensor.shape_text}" in note  # type: ignore[union-attr]
    assert ("forward value was already non-finite" in note) is forward_bad
    assert gradient_summary(graph).nonfinite >= 1


@pytest.mark.parametrize("program", sorted(FINITE))
def test_finite_although_it_looks_otherwise(program: str) -> None:
    graph = _traced(FINITE[program])
    assert graph.nonfinite_origin is None
    assert all(n.grad is None or n.grad.finite for n in graph.nodes)
    assert not any("first appears" in n for n in graph.notes)


def test_where_log_note_points_at_the_forward() -> None:
    graph = _traced(NONFINITE["where(x > 0, log(x), 0) at 0"][0])
    note = next(n for n in graph.notes if "first appears" in n)
    assert note.startswith("NaN first appears in backward at LogBackward0")
    assert "log(0) = -inf" in note


def test_origin_note_names_module_and_line_when_recorded() -> None:
    import dataclasses

    from graphviz_app.analysis.gradient_report import origin_text

    graph = _traced(NONFINITE["sqrt(x) at 0"][0])
    origin = graph.node(graph.nonfinite_origin)  # type: ignore[arg-type]
    tagged = dataclasses.replace(origin, module="encoder.norm", source="model.py:42 in forward")
    graph = dataclasses.replace(graph, nodes=tuple(tagged if n.id == origin.id else n for n in graph.nodes))
    text = origin_text(graph, slot=0)
    assert "in module encoder.norm, made at model.py:42 in forward" in text
