"""Draw a model check's verdicts on the traced graph: the culprit red, what it explains orange, passed green."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..analysis.model_check import ModelCheck
from ..analysis.model_check_nodes import with_check
from ..errors import RenderError, UnsupportedFormatError
from ..model import Graph
from .check_overlay import CHECK_LOOK, CheckOverlay
from .renderer import RANKDIRS, _draw

__all__ = ["CHECK_LOOK", "CHECK_FORMATS", "CheckOverlay", "check_viewer_overlay", "export_check", "save_check"]

CHECK_FORMATS = ("dot", "html", "json")


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
    """The graph coloured by check verdict: "html" the interactive viewer, "dot" the Graphviz text,
    "json" the saved graph carrying the verdicts (`with_check`; `Graph.from_json` reads it back).
    The HTML page's graph carries them too.

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
    carried = with_check(graph, check)
    if fmt == "json":
        return carried.to_json().encode()
    from ..viewer import page_html, payload

    return page_html(payload(carried, title=check.first_line(), rankdir=rankdir)).encode()


def save_check(graph: Graph, check: ModelCheck, path: str | Path, *, rankdir: str = "TB") -> Path:
    """Write `export_check`'s drawing to `path`, the format chosen by its suffix; returns the path.

    Raises:
        UnsupportedFormatError: the suffix is not .dot, .html or .json.
        RenderError: the file cannot be written.
    """
    path = Path(path)
    data = export_check(graph, check, path.suffix, rankdir=rankdir)
    try:
        path.write_bytes(data)
    except OSError as e:
        raise RenderError(f"cannot write {str(path)!r}: {e.strerror}") from e
    return path
