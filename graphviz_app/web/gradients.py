"""The page's gradient view, worker side: trace with gradients, the NaN origin's program line, repeats.

Runs inside the isolated worker (called from `jobs.analysis_job`); torch is
imported inside the functions, so the server never loads it.
"""

from __future__ import annotations

from typing import Any

from ..errors import GradientError
from ..gradient_report import gradient_summary
from ..model import Graph
from ..repeats import find_repeats
from .lines import LineMap, evaluate_with_lines, line_of
from .urlstate import Options

__all__ = ["evaluate", "trace_graph", "color_by", "origin_statement", "page_notes"]


def evaluate(program: str, options: Options) -> tuple[Any, LineMap | None]:
    """The program evaluated; with gradients shown, also which line made each op."""
    import torch

    dtype = getattr(torch, options.dtype)
    if options.show_gradients:
        return evaluate_with_lines(program, device=options.device, dtype=dtype)
    from ..expr import evaluate as plain

    return plain(program, device=options.device, dtype=dtype), None


def trace_graph(ev: Any, options: Options) -> tuple[Graph, list[str]]:
    """The traced graph, with gradients when asked and possible; notes say when not."""
    from ..tracer import trace

    kwargs = dict(show_saved=options.show_saved, show_attrs=options.show_attrs, max_nodes=options.max_nodes)
    if not options.show_gradients:
        return trace(ev.output, ev.variables, **kwargs), []
    try:
        return trace(ev.output, ev.variables, gradients=True, **kwargs), []
    except GradientError as e:
        return trace(ev.output, ev.variables, **kwargs), [f"gradients are not shown: {e}"]


def color_by(graph: Graph) -> str:
    """"gradient" for a graph traced with gradients, else "device"."""
    return "gradient" if any(n.grad is not None for n in graph.nodes) else "device"


def origin_statement(graph: Graph, ev: Any, lines: LineMap | None, program: str) -> str | None:
    """Where NaN/Inf first appears in backward: the op, and the program line that made it."""
    if graph.nonfinite_origin is None:
        return None
    note = next((n for n in graph.notes if "first appears in backward" in n), "")
    outputs = list(ev.output) if isinstance(ev.output, tuple) else [ev.output]
    line = line_of(graph, graph.nonfinite_origin, outputs, lines) if lines is not None else None
    if line is None:
        return note
    text = program.splitlines()[line - 1].strip() if 0 < line <= len(program.splitlines()) else ""
    return f"{note}. It was made on line {line} of the program: `{text}`"


def page_notes(graph: Graph) -> list[str]:
    """The gradient summary and any repeated block (forward passes the graph holds)."""
    notes = []
    if color_by(graph) == "gradient":
        notes.append(f"Gradients: {gradient_summary(graph)}")
    repeat = find_repeats(graph)
    if repeat is not None:
        notes.append(str(repeat)[0].upper() + str(repeat)[1:])
    return notes
