"""The page's gradient view, worker side: the NaN origin's program line, the gradient summary, repeats.

Runs inside the page's worker (called from `page.analysis_job`).
"""

from __future__ import annotations

from collections import deque

from ..analysis.gradient_report import gradient_summary
from ..analysis.repeats import find_repeats
from ..drawing.gradient_style import default_coloring
from ..model import EdgeKind, Graph

__all__ = ["origin_statement", "page_notes"]


def origin_statement(graph: Graph, program: str) -> str | None:
    """Where NaN/Inf first appears in backward: the op, and the program line that made it."""
    if graph.nonfinite_origin is None:
        return None
    note = next((n for n in graph.notes if "first appears in backward" in n), "")
    line = _program_line(graph, graph.nonfinite_origin)
    if line is None:
        return note
    text = program.splitlines()[line - 1].strip() if 0 < line <= len(program.splitlines()) else ""
    return f"{note}. It was made on line {line} of the program: `{text}`"


def _program_line(graph: Graph, node_id: str) -> int | None:
    """The program line (`Node.source` "program:N") of a node, or of the nearest consumer that has one.

    Ops a library call makes without a torch call of their own (a custom
    Function's internals) take the line of the op that consumes them.
    """
    consumers: dict[str, list[str]] = {}
    for e in graph.edges:
        if e.kind is EdgeKind.DATA:
            consumers.setdefault(e.src, []).append(e.dst)
    by_id = {n.id: n for n in graph.nodes}
    queue, seen = deque([node_id]), {node_id}
    while queue:
        node = by_id[queue.popleft()]
        if node.source is not None and node.source.startswith("program:"):
            return int(node.source.partition(":")[2])
        for dst in consumers.get(node.id, ()):
            if dst not in seen:
                seen.add(dst)
                queue.append(dst)
    return None


def page_notes(graph: Graph) -> list[str]:
    """The gradient summary and any repeated block (forward passes the graph holds)."""
    notes = []
    if default_coloring(graph) == "gradient":
        notes.append(f"Gradients: {gradient_summary(graph)}")
    repeat = find_repeats(graph)
    if repeat is not None:
        notes.append(str(repeat)[0].upper() + str(repeat)[1:])
    return notes
