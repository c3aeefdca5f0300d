"""The page's gradient view, worker side: trace with gradients, the NaN origin's program line, repeats.

Runs inside the isolated worker (called from `jobs.analysis_job`).
"""

from __future__ import annotations

from collections import deque
from typing import Any

import torch

from ...analysis.gradient_report import gradient_summary
from ...analysis.repeats import find_repeats
from ...drawing.gradient_style import default_coloring
from ...errors import GradientError
from ...expr import evaluate as run
from ...model import EdgeKind, Graph
from ...tracing.tracer import trace
from ..urlstate import Options

__all__ = ["evaluate", "trace_graph", "origin_statement", "page_notes"]


def evaluate(program: str, options: Options) -> Any:
    """The program evaluated; with gradients shown, each op's source is its program line."""
    return run(program, device=options.device, dtype=getattr(torch, options.dtype),
               source_lines=options.show_gradients, isolated=False)


def trace_graph(ev: Any, options: Options) -> tuple[Graph, list[str]]:
    """The traced graph, with gradients when asked and possible; notes say when not."""
    def traced(gradients: bool) -> Graph:
        return trace(ev.output, ev.params, names=ev.variables, show_saved=options.show_saved,
                     show_attrs=options.show_attrs, max_nodes=options.max_nodes, gradients=gradients)

    if not options.show_gradients:
        return traced(False), []
    try:
        return traced(True), []
    except GradientError as e:
        return traced(False), [f"gradients are not shown: {e}"]


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
