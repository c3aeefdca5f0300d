"""One options record for export, export_drawing and save: keywords build it once, unknown ones are refused."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import get_type_hints

import pytest

from graphviz_app.drawing import options as options_module
from graphviz_app.drawing.options import DrawKeywords, DrawOptions
from graphviz_app.drawing.renderer import export, export_drawing, save
from graphviz_app.errors import RenderError, UnsupportedFormatError
from graphviz_app.model import Edge, Graph, Node, NodeKind


def _graph() -> Graph:
    nodes = (Node("n0", NodeKind.OUTPUT, "out"), Node("n1", NodeKind.OP, "MulBackward0", module="block.0"),
             Node("n2", NodeKind.OP, "MulBackward0", module="block.1"), Node("n3", NodeKind.LEAF, "x"))
    return Graph(nodes=nodes, edges=(Edge("n1", "n0"), Edge("n2", "n1"), Edge("n3", "n2")))


def test_the_keyword_api_names_every_field_of_the_record_with_its_type() -> None:
    fields = {f.name: f.type for f in dataclasses.fields(DrawOptions)}
    keywords = get_type_hints(DrawKeywords)
    record = get_type_hints(DrawOptions, globalns=vars(options_module))
    assert list(keywords) == list(fields) and keywords == record


@pytest.mark.parametrize(("keywords", "record"), [
    ({}, DrawOptions()),
    ({"rankdir": "LR", "legend": False}, DrawOptions(rankdir="LR", legend=False)),
    ({"depth": 0, "clusters": False, "max_attr_chars": 10}, DrawOptions(depth=0, clusters=False, max_attr_chars=10)),
])
def test_keywords_and_the_record_draw_the_same(keywords: dict[str, object], record: DrawOptions) -> None:
    graph = _graph()
    assert export(graph, "dot", **keywords) == export(graph, "dot", options=record)
    assert export(graph, "json", **keywords) == export(graph, "json", options=record)


def test_a_keyword_replaces_that_field_of_the_record(tmp_path: Path) -> None:
    graph = _graph()
    record = DrawOptions(rankdir="LR", legend=False)
    text = save(graph, tmp_path / "g.dot", options=record, rankdir="BT").read_text()
    assert "rankdir=BT" in text and "legend" not in text  # BT from the keyword, no legend from the record
    assert record.rankdir == "LR"  # the record itself is untouched


@pytest.mark.parametrize("call", [
    lambda g, **k: export(g, "dot", **k),
    lambda g, **k: export_drawing(g, "svg", **k),
    lambda g, **k: save(g, "never-written.dot", **k),
], ids=["export", "export_drawing", "save"])
def test_an_unknown_keyword_is_refused_naming_the_options(call) -> None:  # noqa: ANN001
    with pytest.raises(TypeError, match=r"\(\) got an unexpected keyword argument 'rankdr'; its drawing options are "
                                        r"rankdir, legend, max_attr_chars, depth, roll, expanded, clusters, color_by"):
        call(_graph(), rankdr="LR")
    assert not Path("never-written.dot").exists()


@pytest.mark.parametrize(("field", "value", "message"), [
    ("rankdir", "up", "rankdir must be one of TB, BT, LR, RL, got 'up'"),
    ("color_by", "colour", "color_by must be one of device, gradient, order, check, got 'colour'"),
])
def test_a_bad_choice_is_refused_by_the_record_and_by_every_function(field: str, value: str, message: str) -> None:
    with pytest.raises(RenderError, match=message):
        DrawOptions(**{field: value})
    for call in (lambda: export(_graph(), "dot", **{field: value}),
                 lambda: export_drawing(_graph(), "svg", **{field: value})):
        with pytest.raises(RenderError, match=message):
            call()


def test_a_measurement_is_for_html_only_whichever_function_is_given_it() -> None:
    marker = object()  # refused before it is read
    with pytest.raises(UnsupportedFormatError, match="a measurement is shown by the HTML viewer only"):
        export(_graph(), "dot", measured=marker)
    with pytest.raises(UnsupportedFormatError, match="a measurement is shown by the HTML viewer only"):
        export_drawing(_graph(), "svg", measured=marker)
    with pytest.raises(UnsupportedFormatError, match="overlays are colourings of the HTML viewer only, not of 'svg'"):
        export_drawing(_graph(), "svg", overlays={"latency": {"n1": 1.0}})
