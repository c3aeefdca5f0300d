"""Open a saved graph in the worker: read it as data (`web.upload`), describe it, and make the viewer's data."""

from __future__ import annotations

import time

from ..errors import GraphvizAppError
from ..web.results import Analysis, Failure
from ..web.upload import file_notes, read_saved_graph
from ..web.urlstate import Options
from .viewing import depth_note, module_rows, viewer_data

__all__ = ["saved_graph_job"]


def saved_graph_job(data: bytes, name: str, options: Options) -> Analysis | Failure:
    """The uploaded file `data` (called `name`) as the page shows a graph: summary, viewer, module table.

    Runs in the worker, under its time and memory limits: a file built to be slow or big to read
    stops there, not in the server.
    """
    start = time.perf_counter()
    try:
        graph = read_saved_graph(data, name)
        viewer = viewer_data(graph, options, title=name)
        rows = module_rows(graph)
        summary = str(graph.summary())
    except GraphvizAppError as e:
        return Failure(str(e), kind="input")
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError) as e:
        # The schema check passed, but a value is not one the model's analyses can use.
        return Failure(f"{name} holds a graph the page cannot show: {type(e).__name__}: {str(e)[:300]}",
                       kind="input")
    # The file itself is the graph's JSON for the downloads (any schema reads back); writing it
    # again would take seconds for a big graph.
    return Analysis(
        summary=summary, viewer=viewer, graph_json=data.decode("utf-8-sig"), node_count=len(graph.nodes),
        outputs=(), grads=(), leaves=(), notes=tuple(file_notes(graph) + depth_note(graph, options.module_depth)),
        seconds=time.perf_counter() - start,
        modules=rows, source=name,
    )
