"""The "check" colouring: the culprit red with its source line, passed green, in DOT and in the viewer's overlay."""

from __future__ import annotations

import pytest

from graphviz_app.analysis.model_check import ModelCheck, Status, UnitKind, Verdict
from graphviz_app.analysis.model_check_nodes import CHECK_CODES
from graphviz_app.drawing.check_style import CHECK_LOOK, check_viewer_overlay, export_check, save_check
from graphviz_app.errors import UnsupportedFormatError
from graphviz_app.model import Edge, EdgeKind, Graph, ModuleInfo, Node, NodeKind

GRAPH = Graph((
    Node("n0", NodeKind.OUTPUT, "output"),
    Node("n1", NodeKind.OP, "Evil\"]Backward", module="blocks.0"),
    Node("n2", NodeKind.OP, "AddBackward0", module="blocks.1"),
), (Edge("n1", "n0", EdgeKind.DATA), Edge("n2", "n1", EdgeKind.DATA)),
    modules=(ModuleInfo("", "Net"), ModuleInfo("blocks.0", "Evil\"]"), ModuleInfo("blocks.1", "Block")))
CHECK = ModelCheck(
    verdicts=(
        Verdict("blocks.0", UnitKind.FUNCTION, "Evil\"]", "Evil\"].backward", "a\\b.py:3", Status.FAILED,
                culprit=True, ratio=2.0, input="x input"),
        Verdict("blocks.1", UnitKind.MODULE, "Block", "Block.forward", "m.py:9", Status.PASSED),
        Verdict("", UnitKind.MODULE, "Net", "Net.forward", "m.py:20", Status.FAILED,
                explained_by="blocks.0 (Evil\"].backward)"),
    ),
    model_type="Net", strategy="all", modes=("rev",), order=1, kinks="pass", probes=12, evaluations=10,
    seconds=0.1, budget_spent=False)


def test_the_dot_colours_the_culprit_and_names_its_line_as_text() -> None:
    dot = export_check(GRAPH, CHECK, "dot").decode()
    culprit_fill, passed_fill = CHECK_LOOK[CHECK_CODES["culprit"]][0], CHECK_LOOK[CHECK_CODES["passed"]][0]
    n1 = next(line for line in dot.splitlines() if line.strip().startswith("n1 "))
    n2 = next(line for line in dot.splitlines() if line.strip().startswith("n2 "))
    assert culprit_fill in n1 and "penwidth=3" in n1 and passed_fill in n2
    assert 'Evil\\"].backward, a\\\\b.py:3' in n1  # quoted: a name is text, never DOT syntax
    assert "backward is 2 x finite differences" in dot


def test_the_viewer_overlay_codes_nodes_and_boxes_and_flags_the_culprit() -> None:
    overlay = check_viewer_overlay(GRAPH, CHECK)
    assert overlay["key"] == "check" and overlay["scale"] == "linear"
    assert overlay["node"] == [None, CHECK_CODES["culprit"], CHECK_CODES["passed"]]
    assert overlay["flag"] == [1] and overlay["mark"] == [1]
    assert CHECK_CODES["culprit"] in overlay["group"] and CHECK_CODES["passed"] in overlay["group"]
    words = 'culprit Evil"].backward: 2 x (x input), a\\b.py:3'  # the module table's words, with the line
    assert words in overlay["text"] and words in overlay["node_text"]  # text: the viewer writes it as text


def test_the_html_page_carries_the_check(tmp_path: pytest.TempPathFactory) -> None:
    path = save_check(GRAPH, CHECK, tmp_path / "check.html")  # type: ignore[operator]
    text = path.read_text()
    assert text.startswith("<!DOCTYPE html>") and "Evil&quot;]" in text
    with pytest.raises(UnsupportedFormatError, match="cannot write a check drawing as 'png'"):
        export_check(GRAPH, CHECK, "png")


def test_a_graph_carrying_its_check_draws_it_with_color_by_check_and_a_graph_without_says_what_to_do() -> None:
    from graphviz_app.analysis.model_check_nodes import with_check
    from graphviz_app.drawing.renderer import export
    from graphviz_app.errors import RenderError

    carried = Graph.from_json(with_check(GRAPH, CHECK).to_json())  # as saved and read back
    dot = export(carried, "dot", color_by="check").decode()
    n1 = next(line for line in dot.splitlines() if line.strip().startswith("n1 "))
    assert CHECK_LOOK[CHECK_CODES["culprit"]][0] in n1 and "penwidth=3" in n1
    assert 'Evil\\"].backward, a\\\\b.py:3' in n1
    assert "backward is 2 x finite differences" in dot  # the culprit's line heads the picture
    drawn = [line.strip() for line in export_check(GRAPH, CHECK, "dot").decode().splitlines()]
    assert n1.strip() in drawn  # the culprit drawn as export_check draws it from the live result
    with pytest.raises(RenderError, match="color_by='check' colours by a model check's verdicts and this graph "
                                          "carries none: draw with_check"):
        export(GRAPH, "dot", color_by="check")


def test_the_check_saved_as_json_is_the_graph_carrying_its_verdicts(tmp_path: pytest.TempPathFactory) -> None:
    path = save_check(GRAPH, CHECK, tmp_path / "check.json")  # type: ignore[operator]
    back = Graph.from_json(path.read_text())
    assert back.checks == CHECK.verdicts and back.nodes == GRAPH.nodes
