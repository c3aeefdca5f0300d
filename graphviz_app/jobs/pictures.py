"""The SVG and PNG downloads: laid out by Graphviz in the worker when a person asks for one.

The page itself never waits for Graphviz: the browser lays the graph out. A download is
laid out from the graph's JSON on demand, within the job's time budget.
"""

from __future__ import annotations

import subprocess
import time

from ..drawing.order_style import picture_coloring
from ..drawing.renderer import export
from ..errors import GraphvizAppError, RenderError
from ..model import Graph
from ..web.pngplan import png_plan, png_refusal
from ..web.results import Failure

__all__ = ["svg_job", "png_job"]

_INSTEAD = (". The page's viewer shows the whole graph, laid out in your browser; for a file that shows "
            "it too, download the JSON and run `graphviz-app render autograd.json -o autograd.html`")


def svg_job(graph_json: str, rankdir: str, time_budget: float = 60.0) -> bytes | Failure:
    """The graph laid out as SVG, stopped at `time_budget` seconds."""
    graph = Graph.from_json(graph_json)
    try:
        return _export(graph, "svg", rankdir, time_budget)
    except RenderError as e:
        return Failure(str(e) + (_INSTEAD if isinstance(e.__cause__, subprocess.TimeoutExpired) else ""),
                       kind="render")
    except GraphvizAppError as e:
        return Failure(str(e), kind="render")


def png_job(
    graph_json: str, rankdir: str, time_budget: float = 60.0, time_limit: float | None = None
) -> bytes | Failure:
    """The graph as PNG: laid out first, refused when its pixels would take too long (`pngplan`).

    `time_limit` is the job limit the refusal names (the runner's; `time_budget` when None).
    """
    start = time.perf_counter()
    graph = Graph.from_json(graph_json)
    try:
        svg = _export(graph, "svg", rankdir, time_budget).decode()
    except RenderError as e:
        return Failure(str(e) + (_INSTEAD if isinstance(e.__cause__, subprocess.TimeoutExpired) else ""),
                       kind="render")
    except GraphvizAppError as e:
        return Failure(str(e), kind="render")
    refusal = png_refusal(png_plan(svg), node_count=len(graph.nodes),
                          time_limit=time_budget if time_limit is None else time_limit)
    if refusal is not None:
        return Failure(refusal, kind="render")
    left = max(time_budget - (time.perf_counter() - start), 0.001)
    try:
        return _export(graph, "png", rankdir, left)
    except RenderError as e:
        if not isinstance(e.__cause__, subprocess.TimeoutExpired):
            return Failure(str(e), kind="render")
        # Not the layout's fault (1,499 nodes: layout 0.6 s, pixels 18 s; benchmarks/bench_png.py).
        return Failure(
            f"drawing the PNG of {len(graph.nodes):,} nodes took over {time_budget:g} s and was stopped: "
            "the layout is quick, turning it into pixels is what takes long. Download the SVG "
            "instead (full size, any browser opens it), or lower the node limit", kind="render")
    except GraphvizAppError as e:
        return Failure(str(e), kind="render")


def _export(graph: Graph, fmt: str, rankdir: str, timeout: float) -> bytes:
    return export(graph, fmt, rankdir=rankdir, timeout=timeout, color_by=picture_coloring(graph))
