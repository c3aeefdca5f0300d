"""Compare two graphs in the worker: two saved files read as data (`web.upload`), or the graphs of two programs the
page ran; align them and make the panes' data."""

from __future__ import annotations

import time

from ..errors import GraphvizAppError
from ..model import Graph
from ..viewer.compare import compare_payload
from ..viewer.payload import encode
from ..web.pair import SavedPair, pair_labels
from ..web.results import Failure
from ..web.upload import read_saved_graph
from ..web.urlstate import Options

__all__ = ["compare_saved_job", "compare_graphs_job"]


def compare_saved_job(data_a: bytes, name_a: str, data_b: bytes, name_b: str, options: Options) -> SavedPair | Failure:
    """The uploaded files `data_a` and `data_b` as two synced panes, aligned by `diff()`.

    Runs in the worker, under its time and memory limits, like `saved.saved_graph_job`.
    """
    start = time.perf_counter()
    try:
        graphs = read_saved_graph(data_a, name_a), read_saved_graph(data_b, name_b)
        labels = pair_labels(name_a, name_b)
        data = compare_payload(*graphs, labels=labels, rankdir=options.rankdir)
        viewer = encode(data)
    except GraphvizAppError as e:
        return Failure(str(e), kind="input")
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError) as e:
        return Failure(f"{name_a} and {name_b} hold graphs the page cannot compare: {type(e).__name__}: "
                       f"{str(e)[:300]}", kind="input")
    return SavedPair(summary=data["summary"], viewer=viewer, labels=labels,
                     node_counts=(len(graphs[0].nodes), len(graphs[1].nodes)), seconds=time.perf_counter() - start)


def compare_graphs_job(json_a: str, json_b: str, labels: tuple[str, str], options: Options) -> SavedPair | Failure:
    """The graphs of two programs the page ran (`Analysis.graph_json`) as two synced panes named `labels`.

    Runs in the worker, under its time and memory limits: aligning two graphs of 20,000 nodes is
    work the server's process does not take on.
    """
    start = time.perf_counter()
    try:
        graphs = Graph.from_json(json_a), Graph.from_json(json_b)
        data = compare_payload(*graphs, labels=labels, rankdir=options.rankdir)
        viewer = encode(data)
    except GraphvizAppError as e:
        return Failure(str(e), kind="input")
    except (ValueError, TypeError) as e:
        return Failure(f"the two programs' graphs cannot be compared: {type(e).__name__}: {str(e)[:300]}",
                       kind="input")
    return SavedPair(summary=data["summary"], viewer=viewer, labels=labels,
                     node_counts=(len(graphs[0].nodes), len(graphs[1].nodes)), seconds=time.perf_counter() - start)
