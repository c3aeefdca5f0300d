"""Read a saved graph a person uploads: data only, size-limited, schema-checked, every failure in words."""

from __future__ import annotations

import json

from ..errors import GraphvizAppError, SchemaError
from ..model import Graph
from ..model.schema import STRICT_JSON

__all__ = ["MAX_UPLOAD_MB", "MAX_UPLOAD_BYTES", "MAX_NOTES", "read_saved_graph", "file_notes", "too_big"]

# Reading a saved graph and making the viewer's data takes the worker about 0.13 s of CPU per 1,000
# nodes (a 64,000-node graph with gradients: 48 MB of schema 2, 23 MB of the compact schema 3, 8 s
# and 250 MB). 25 MB keeps any file within about 8 s, half the worker's 15 s limit, so a busy
# machine still finishes it. Bigger graphs open as a file: `graphviz-app render g.json -o g.html`.
MAX_UPLOAD_MB = 25
MAX_UPLOAD_BYTES = MAX_UPLOAD_MB * 1000 * 1000
MAX_NOTES = 10  # a file's notes shown on the page; the rest are counted
_NOTE_CHARS = 1000
_AS_FILE = "open it as a file instead: `graphviz-app render {name} -o graph.html` makes a page any browser opens"


def too_big(size: int, name: str) -> str | None:
    """Why a file of `size` bytes is refused, or None when it is small enough.

    >>> too_big(10, "g.json") is None
    True
    >>> too_big(60_000_000, "g.json")[:40]
    'g.json is 60.0 MB; the page opens saved '
    """
    if size <= MAX_UPLOAD_BYTES:
        return None
    return (f"{name} is {size / 1e6:,.1f} MB; the page opens saved graphs of at most {MAX_UPLOAD_MB} MB "
            f"(about 30,000 nodes, more in the compact schema 3): {_AS_FILE.format(name=name)}")


def read_saved_graph(data: bytes, name: str) -> Graph:
    """The graph in `data`, a `.json` written by `save(graph, "g.json")` (schema 1, 2 or the compact 3).

    Nothing in the file is run: it is parsed as JSON and checked field by field.

    Raises:
        SchemaError: what is wrong with the file, in words (too big, not UTF-8, not JSON,
            nested too deeply, not a saved graph, a field of the wrong type).

    >>> read_saved_graph(b'{"schema": 9}', "g.json")
    Traceback (most recent call last):
    ...
    graphviz_app.errors.SchemaError: g.json is not a graph this page reads: expected a graph with "schema": ...
    """
    refusal = too_big(len(data), name)
    if refusal is not None:
        raise SchemaError(refusal)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise SchemaError(f"{name} is not UTF-8 text (byte {e.start:,} is not): save the graph again with "
                          'save(graph, "g.json")') from e
    try:
        parsed = json.loads(text, **STRICT_JSON)  # no NaN/Infinity, no key twice
    except SchemaError as e:
        raise SchemaError(f"{name} is not a graph this page reads: {e}") from e
    except RecursionError as e:  # Python's JSON reader recurses once per level of nesting
        raise SchemaError(f"{name} nests its JSON deeper than the reader goes (about 1,000 levels; a saved "
                          "graph nests 6): it is not a saved graph") from e
    except ValueError as e:  # JSONDecodeError, and numbers of over 4,300 digits
        if isinstance(e, json.JSONDecodeError):
            raise SchemaError(f"{name} is not JSON ({_first_line(e)}): upload the .json that "
                              'save(graph, "g.json") wrote') from e
        raise SchemaError(f"{name} holds a number of more than 4,300 digits, which no saved graph holds: "
                          'upload the .json that save(graph, "g.json") wrote') from e
    try:
        return Graph.from_dict(parsed)
    except SchemaError as e:
        raise SchemaError(f"{name} is not a graph this page reads: {e}") from e
    except (GraphvizAppError, ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError) as e:
        raise SchemaError(f"{name} is not a graph this page reads: a field holds the wrong kind of value "
                          f"({type(e).__name__}: {_first_line(e)})") from e


def file_notes(graph: Graph) -> list[str]:
    """The file's own notes, at most `MAX_NOTES`, each cut to a readable length."""
    notes = [n if len(n) <= _NOTE_CHARS else n[:_NOTE_CHARS] + "…" for n in graph.notes[:MAX_NOTES]]
    if len(graph.notes) > MAX_NOTES:
        notes.append(f"{len(graph.notes) - MAX_NOTES:,} more notes are in the file")
    return notes


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    line = text.splitlines()[0] if text else type(e).__name__
    return line[:300]
