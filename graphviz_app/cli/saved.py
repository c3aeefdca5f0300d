"""The CLI's side of saved graphs: read a graph saved as JSON, and the formats that take the whole graph."""

from __future__ import annotations

from pathlib import Path

from ..errors import SchemaError
from ..model import Graph
from .files import FileProblem, file_kind, read_input

__all__ = ["MAX_SAVED_BYTES", "WHOLE_GRAPH_FORMATS", "is_saved_graph", "load_saved_graph", "output_format"]

# A saved graph bigger than this is refused before it is read (a 1,000,000-op chain is about 600 MB).
MAX_SAVED_BYTES = 2 * 1024**3
# Formats drawn from the whole graph: the viewer and Model Explorer fold it themselves.
WHOLE_GRAPH_FORMATS = ("html", "model-explorer")


def is_saved_graph(target: str | None) -> bool:
    """Whether the CLI's target names a saved graph (`g.json`) rather than a script or an expression.

    >>> is_saved_graph("g.json"), is_saved_graph("model.py:build"), is_saved_graph("x.sum()")
    (True, False, False)
    """
    return bool(target) and str(target).lower().endswith(".json") and "\n" not in str(target)


def load_saved_graph(path: str | Path) -> Graph:
    """Read a graph written by `save(graph, "g.json")` (schema 1, 2 or 3).

    Raises:
        SchemaError: the file is missing, a special file (a FIFO, a device), too big, not JSON, or not a
            graph (the message says which).
    """
    path = Path(path)
    kind = file_kind(path)
    if kind is None:
        raise SchemaError(f"no saved graph at {path}: give the path of a .json file written by save(graph, 'g.json') "
                          f"(cannot read {path}: no such file)")
    if kind == "a regular file" and path.stat().st_size > MAX_SAVED_BYTES:
        size = path.stat().st_size
        raise SchemaError(f"cannot read {path}: {path} is {size:,} bytes, more than the {MAX_SAVED_BYTES:,} a saved "
                          "graph may have")
    try:
        text = read_input(path, limit=MAX_SAVED_BYTES, what="the saved graph",
                          fix="give the path of a .json file written by save(graph, 'g.json')")
    except FileProblem as e:
        raise SchemaError(str(e)) from e
    try:
        return Graph.from_json(text)
    except RecursionError as e:
        raise SchemaError(f"{path} is nested too deeply to be a saved graph") from e
    except SchemaError as e:
        raise SchemaError(f"{path}: {e}") from e


def output_format(output: str, requested: str | None) -> str:
    """The format to write: `requested` (--format), else the output's suffix.

    >>> output_format("g.html", None), output_format("g.json", "model-explorer")
    ('html', 'model-explorer')
    """
    return requested if requested else Path(output).suffix.lower().lstrip(".")
