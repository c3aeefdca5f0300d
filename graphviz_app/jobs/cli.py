"""The command line's jobs, run inside its worker process: the language's text in, plain data out.

`graphviz-app render EXPR` and `graphviz-app check EXPR` run the program here,
in a worker process the CLI can stop, so a program never leaves the command
waiting: the evaluator stops between operations at its time limit, costs
refuse the ops known to run long, and `hard_deadline` ends the worker inside
any other op that runs past it. The CLI names these jobs by reference
(`cli.worker`) and never imports this module.
"""

from __future__ import annotations

from typing import Any

from ..tracing.big_stack import call_with_large_stack
from .checking import CheckRequest, check_program
from .programs import TraceOptions, trace_program

__all__ = ["trace_job", "check_job"]


def trace_job(source: str, options: dict[str, Any]) -> tuple[str, tuple[str, ...]]:
    """Evaluate and trace a program: its graph as JSON (`Graph.from_json` reads it back), and notes for the person.

    `options` are `TraceOptions`' fields by name (plain data: the CLI never imports this package).

    Raises:
        ExprError: the program is refused or fails.
        TraceError: its output has no graph.
    """
    def run() -> tuple[str, tuple[str, ...]]:
        traced = trace_program(source, TraceOptions(**options))
        return traced.graph.to_json(), traced.notes

    # Freeing a deep autograd graph recurses in C++: on a large stack.
    return call_with_large_stack(run)


def check_job(source: str, request: dict[str, Any]) -> tuple[bool, str, dict[str, Any], tuple[str, ...]]:
    """Check the program's gradients: (passed, the report as text, as a dict, the checker's warnings).

    `request` holds `CheckRequest`'s fields by name.

    Raises:
        ExprError: the program or the expected gradient is refused or fails, or no variable requires grad.
        GradcheckError: the checker cannot check this function.
    """
    outcome = check_program(source, CheckRequest(**request))
    return outcome.passed, outcome.text, outcome.report, outcome.warnings
