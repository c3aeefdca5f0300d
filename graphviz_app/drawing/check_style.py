"""Draw a model check's verdicts on the traced graph: the culprit red, what it explains orange, passed green."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from graphviz.quoting import attr_list

from ..analysis.model_check import ModelCheck, Verdict
from ..analysis.model_check_nodes import CHECK_CODES, check_code, node_verdicts
from ..errors import RenderError, UnsupportedFormatError
from ..model import Edge, Graph, Node
from .dot_text import escape_text, graphviz_attr
from .renderer import RANKDIRS, _draw

__all__ = ["CHECK_LOOK", "CHECK_FORMATS", "CheckOverlay", "check_viewer_overlay", "export_check", "save_check"]

# Code -> (fill, border, words for the legend).
CHECK_LOOK = {
    CHECK_CODES["passed"]: ("#d3f9d8", "#2f9e44", "backward agrees with finite differences"),
    CHECK_CODES["unchecked"]: ("#f1f3f5", "#868e96", "not checked, or not checkable"),
    CHECK_CODES["detached"]: ("#e7f5ff", "#1c7ed6", "detached: no gradient path (a .detach()), no wrong backward"),
    CHECK_CODES["explained"]: ("#ffe8cc", "#e8590c", "fails because of a culprit inside"),
    CHECK_CODES["culprit"]: ("#ffc9c9", "#e03131", "the culprit: its backward is wrong"),
}
CHECK_FORMATS = ("dot", "html")


class CheckOverlay:
    """Per-node attributes of a drawing coloured by check verdict (the renderer's overlay)."""

    def __init__(self, graph: Graph, check: ModelCheck) -> None:
        self.check = check
        self.verdicts = node_verdicts(graph, check)

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
        import html

        rows = ['<TR><TD COLSPAN="2"><B>model check</B></TD></TR>']
        for fill, _, words in CHECK_LOOK.values():
            rows.append(f'<TR><TD BGCOLOR="{fill}"> </TD><TD>{html.escape(words)}</TD></TR>')
        return rows

    def graph_attrs(self) -> dict[str, str]:
        return {"label": graphviz_attr(self.check.first_line()), "labelloc": "t"}


def _line(verdict: Verdict) -> str:
    return f"{verdict.name}, {verdict.source}" if verdict.source else verdict.name


def check_viewer_overlay(graph: Graph, check: ModelCheck) -> dict[str, Any]:
    """The interactive viewer's "check" colouring (see `graphviz_app.viewer.check`): codes per node and box.

    Each module box holds its module's verdict code (`CHECK_CODES`) and its words (`text`);
    the culprit's nodes are flagged.
    """
    from ..viewer.check import check_overlay

    found = check_overlay(graph, None, check)
    return found[0] if found else {"key": "check", "label": "check: nothing checked", "scale": "linear", "unit": "",
                                   "node": [None] * len(graph.nodes), "group": [], "flag": []}


def export_check(graph: Graph, check: ModelCheck, fmt: str, *, rankdir: str = "TB") -> bytes:
    """The graph coloured by check verdict: "html" the interactive viewer, "dot" the Graphviz text.

    Raises:
        UnsupportedFormatError: `fmt` is not one of CHECK_FORMATS.
        RenderError: `rankdir` is not one of RANKDIRS.
    """
    fmt = fmt.lower().lstrip(".")
    if rankdir not in RANKDIRS:
        raise RenderError(f"rankdir must be one of {', '.join(RANKDIRS)}, got {rankdir!r}")
    if fmt not in CHECK_FORMATS:
        raise UnsupportedFormatError(f"cannot write a check drawing as {fmt!r}: choose one of "
                                     f"{', '.join('.' + f for f in CHECK_FORMATS)}")
    if fmt == "dot":
        return _draw(graph, rankdir=rankdir, legend=True, max_attr_chars=50, clusters=True, color_by="device",
                     overlay=CheckOverlay(graph, check)).source.encode()
    from ..viewer import page_html, payload

    data = payload(graph, title=check.first_line(), rankdir=rankdir,
                   extra_overlays=[check_viewer_overlay(graph, check)])
    return page_html(data).encode()


def save_check(graph: Graph, check: ModelCheck, path: str | Path, *, rankdir: str = "TB") -> Path:
    """Write `export_check`'s drawing to `path`, the format chosen by its suffix; returns the path.

    Raises:
        UnsupportedFormatError: the suffix is not .dot or .html.
        RenderError: the file cannot be written.
    """
    path = Path(path)
    data = export_check(graph, check, path.suffix, rankdir=rankdir)
    try:
        path.write_bytes(data)
    except OSError as e:
        raise RenderError(f"cannot write {str(path)!r}: {e.strerror}") from e
    return path
