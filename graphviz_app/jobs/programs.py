"""A program in the expression language to a traced graph: the one path the page and the CLI both take.

Runs inside a worker process: the evaluation is under a hard deadline
(`runner.hard_deadline`), so an operation nobody costed still stops, and the
worker is ended instead of the caller waiting.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import GradientError
from ..expr.api import evaluate
from ..expr.evaluator import Evaluation
from ..expr.limits import Limits
from ..model import Graph
from ..runner import HARD_GRACE_S, hard_deadline
from ..tracing.tracer import trace

__all__ = ["TraceOptions", "TracedProgram", "evaluate_program", "trace_program"]


@dataclass(frozen=True, slots=True)
class TraceOptions:
    """How a program is evaluated and traced.

    Attributes:
        device, dtype: the language's defaults for tensors it makes (``"cpu"``, ``"float64"``; None: torch's).
        show_saved, show_attrs, max_nodes: as for `trace()`.
        gradients: replay backward and record each edge's gradient.
        gradients_or_note: when the gradients cannot be replayed, trace without them and say
            why in a note (the page) instead of raising `GradientError` (the CLI, asked for them).
        source_lines: every op's source is its program line (``program:N``).
    """

    device: str | None = None
    dtype: str | None = None
    show_saved: bool = True
    show_attrs: bool = True
    max_nodes: int | None = None
    gradients: bool = False
    gradients_or_note: bool = False
    source_lines: bool = False


@dataclass(frozen=True, slots=True)
class TracedProgram:
    """A program's evaluation (live tensors: it never leaves the worker), its graph, and notes for the person."""

    evaluation: Evaluation
    graph: Graph
    notes: tuple[str, ...] = ()


def evaluate_program(source: str, options: TraceOptions) -> Evaluation:
    """Run `source` under the language's limits, ended `HARD_GRACE_S` past its time limit inside any one op.

    Raises:
        ExprError: the program is refused or fails.
    """
    with hard_deadline(Limits().max_seconds + HARD_GRACE_S):
        return evaluate(source, device=options.device, dtype=options.dtype, source_lines=options.source_lines,
                        isolated=False)


def trace_program(source: str, options: TraceOptions = TraceOptions()) -> TracedProgram:
    """Evaluate `source` and trace its output, named by its variables.

    With ``options.gradients_or_note``, a graph whose backward cannot be replayed is
    traced without gradients, and a note says why.

    Raises:
        ExprError: the program is refused or fails.
        TraceError: its output has no graph (`GradientError`: its gradients cannot be replayed).

    >>> traced = trace_program("x = torch.ones(2, requires_grad=True)\\n(x * 3).sum()")
    >>> [n.name for n in traced.graph.nodes][:2], traced.notes
    (['output', 'SumBackward0'], ())
    """
    ev = evaluate_program(source, options)

    def traced(gradients: bool) -> Graph:
        return trace(ev.output, ev.params, names=ev.variables, show_saved=options.show_saved,
                     show_attrs=options.show_attrs, max_nodes=options.max_nodes, gradients=gradients)

    if not (options.gradients and options.gradients_or_note):
        return TracedProgram(ev, traced(options.gradients))
    try:
        return TracedProgram(ev, traced(True))
    except GradientError as e:
        return TracedProgram(ev, traced(False), (f"gradients are not shown: {e}",))
