"""Draw what the page shows of a graph: plan the view within the layout budget, lay it out once, describe its nodes."""

from __future__ import annotations

from ...drawing.gradient_style import default_coloring
from ...drawing.layout import find_engine
from ...drawing.renderer import export
from ...errors import GraphvizAppError, RenderError
from ...model import Graph
from ..results import Drawn, Failure
from .details import details_json
from .view import DRAW_BUDGET, plan

__all__ = ["Drawn", "PURE_ABOVE", "draw", "draw_job"]

# graphviz-pure lays out the page's views faster than dot above this many nodes
# (benchmarks/bench_view.py: 1.3x at 1,500 and 2,000 nodes, 1.0x at 1,000).
PURE_ABOVE = 1000


def draw(
    graph: Graph, *, rankdir: str = "TB", expanded: frozenset[str] = frozenset(),
    budget: int = DRAW_BUDGET, timeout: float | None = None, color_by: str = "device",
    depth: int | None = None, roll: bool = False,
) -> Drawn:
    """Plan the view of `graph` (see `view.plan`), lay it out to SVG, describe its nodes.

    `color_by` is the renderer's: "device", or "gradient" for a graph traced with gradients.

    Raises:
        RenderError: the layout failed or ran past `timeout` seconds.
    """
    view = plan(graph, budget=budget, expanded=expanded, depth=depth, roll=roll)
    big = len(view.graph.nodes) > PURE_ABOVE and find_engine("graphviz-pure") is not None
    engine = "graphviz-pure" if big else "auto"
    svg = export(view.graph, "svg", rankdir=rankdir, engine=engine, timeout=timeout, color_by=color_by).decode()
    return Drawn(
        svg=svg, details=details_json(view.graph), note=view.note, mode=view.mode,
        drawn_nodes=len(view.graph.nodes), total_nodes=view.total or len(graph.nodes),
        depth=view.depth, expanded=view.expanded,
    )


def draw_job(graph_json: str, rankdir: str, expanded: tuple[str, ...], time_budget: float = 60.0,
             depth: int | None = None, roll: bool = False) -> Drawn | Failure:
    """`draw` in the worker, for a module opened or closed after the program ran."""
    try:
        graph = Graph.from_json(graph_json)
        return draw(graph, rankdir=rankdir, expanded=frozenset(expanded), timeout=time_budget,
                    color_by=default_coloring(graph), depth=depth, roll=roll)
    except RenderError as e:
        return Failure(str(e), kind="render")
    except GraphvizAppError as e:
        return Failure(str(e), kind="trace")
