"""The Graphviz drawing's "check" colouring: the culprit red with its line, what it explains orange, passed green."""

from __future__ import annotations

import html

from graphviz.quoting import attr_list

from ..analysis.model_check import ModelCheck
from ..analysis.model_check_nodes import CHECK_CODES, check_code, check_finding, node_verdicts
from ..errors import RenderError
from ..model import Edge, Graph, Node
from ..model.checks import Verdict
from .dot_text import escape_text, graphviz_attr

__all__ = ["CHECK_LOOK", "CheckOverlay"]

# Code -> (fill, border, words for the legend).
CHECK_LOOK = {
    CHECK_CODES["passed"]: ("#d3f9d8", "#2f9e44", "backward agrees with finite differences"),
    CHECK_CODES["unchecked"]: ("#f1f3f5", "#868e96", "not checked, or not checkable"),
    CHECK_CODES["detached"]: ("#e7f5ff", "#1c7ed6", "detached: no gradient path (a .detach()), no wrong backward"),
    CHECK_CODES["explained"]: ("#ffe8cc", "#e8590c", "fails because of a culprit inside"),
    CHECK_CODES["culprit"]: ("#ffc9c9", "#e03131", "the culprit: its backward is wrong"),
}


class CheckOverlay:
    """Per-node attributes of a drawing coloured by check verdict (the renderer's overlay, `color_by="check"`).

    `check` is `check_model`'s result; None: the verdicts the graph carries (`Graph.checks`).

    Raises:
        RenderError: `check` is None and the graph carries no verdicts.
    """

    def __init__(self, graph: Graph, check: ModelCheck | None = None) -> None:
        if check is None and not graph.checks:
            raise RenderError("color_by='check' colours by a model check's verdicts and this graph carries none: "
                              "draw with_check(graph, check_model(model, *inputs)) (graphviz_app.analysis."
                              "model_check_nodes)")
        self.check = check
        self.verdicts = node_verdicts(graph, graph.checks if check is None else check)
        self.first_line = check.first_line() if check is not None else check_finding(graph.checks)

    def node(self, node: Node, label: str) -> tuple[str, str]:
        verdict = self.verdicts.get(node.id)
        if verdict is None:
            return label, ""
        code = check_code(verdict)
        fill, border, _ = CHECK_LOOK[code]
        style = {"fillcolor": fill, "color": border, "penwidth": "3" if code == CHECK_CODES["culprit"] else "1"}
        if code == CHECK_CODES["culprit"]:
            label += "\\n" + escape_text(_line(verdict))  # the label's lines come escaped (dot_text)
        return label, attr_list(kwargs=style)[2:-1] + " "

    def edge_attrs(self, edge: Edge) -> str | None:
        return None

    def legend_rows(self) -> list[str]:
        rows = ['<TR><TD COLSPAN="2"><B>model check</B></TD></TR>']
        for fill, _, words in CHECK_LOOK.values():
            rows.append(f'<TR><TD BGCOLOR="{fill}"> </TD><TD>{html.escape(words)}</TD></TR>')
        return rows

    def graph_attrs(self) -> dict[str, str]:
        return {"label": graphviz_attr(self.first_line), "labelloc": "t"}


def _line(verdict: Verdict) -> str:
    return f"{verdict.name}, {verdict.source}" if verdict.source else verdict.name


