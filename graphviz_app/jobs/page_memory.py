"""The page's memory job: one step of the program's graph replayed, bytes alive at every backward node."""

from __future__ import annotations

from ..analysis.memory import memory_timeline
from ..errors import GraphvizAppError
from ..model import Graph
from ..web.memory_view import MemoryPanel, memory_panel_of
from ..web.results import Failure

__all__ = ["memory_job"]


def memory_job(graph_json: str) -> MemoryPanel | Failure:
    """The memory panel of a program's graph (as the analysis job traced it).

    >>> memory_job('{"schema": 2, "nodes": [], "edges": []}').timeline.peak_bytes
    0
    """
    try:
        graph = Graph.from_json(graph_json)
        return memory_panel_of(graph, memory_timeline(graph))
    except (GraphvizAppError, ValueError) as e:
        return Failure(f"no memory timeline for this graph: {e}", kind="trace")
