"""The command line's jobs, run inside its worker process: a program or a script in, plain data out.

`graphviz-app render EXPR` and `graphviz-app check EXPR` run the program here,
in a worker process the CLI can stop, so a program never leaves the command
waiting: the evaluator stops between operations at its time limit, costs
refuse the ops known to run long, and `hard_deadline` ends the worker inside
any other op that runs past it. `render SCRIPT.py:FUNCTION` runs the person's
function here too: the command's --timeout ends a function that hangs. The
CLI names these jobs by reference (`cli.worker`) and never imports this module.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

from ..tracing.big_stack import call_with_large_stack
from ..tracing.orders import record_orders
from .checking import CheckRequest, check_program
from .deferred import DeferredNames
from .memory import MemoryRequest, check_device, memory_report, step_from_result, write_viewer
from .programs import TraceOptions, trace_program
from .script_forms import script_graph
from .scripts import run_script

__all__ = ["trace_job", "check_job", "script_trace_job", "memory_job"]


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


def script_trace_job(path: str, func: str, target: str, options: dict[str, Any], orders: bool, cwd: str) -> str:
    """Call `func()` of the script at `path` and trace what it returns: the graph as JSON.

    `options` are `trace()`'s (show_saved, max_nodes, gradients); `orders` runs the
    function inside `record_orders()` (the CLI's --color-by order); `cwd` is the
    command's folder, where the script runs (its relative paths mean what they say).

    Raises:
        TraceError: the script cannot be imported, the function fails, or returns none of the forms
            `script_forms.script_graph` takes.
    """
    os.chdir(cwd)  # the worker runs one command's jobs

    def run() -> str:
        names = DeferredNames()  # the modules its forward runs, named once it returns (output, model)
        with record_orders() if orders else contextlib.nullcontext():
            result = run_script(Path(path), func, target, names=names)
        return script_graph(result, target, names=names, **options).to_json()

    # Its tensors are made, traced and freed on a big-stack thread: freeing a graph of 100k+
    # walked ops recurses deeply in torch.
    return call_with_large_stack(run)


def memory_job(path: str, func: str, request: dict[str, Any],
               cwd: str) -> tuple[dict[str, Any], str | None, str | None]:
    """The memory report of the step `func()` of the script returns (`memory.memory_report`).

    `request` holds `MemoryRequest`'s fields by name; with its `output`, the last batch's step is
    written into the interactive viewer there. `cwd` as in `script_trace_job`.

    Returns:
        (the report as `--json` prints it, the checkpoint plan's text or None, the path written or None).

    Raises:
        TraceError: a device this machine lacks, a script that fails or returns no model with inputs.
    """
    os.chdir(cwd)
    asked = MemoryRequest(**request)
    check_device(asked.device)  # before the script runs: it may take long

    def run() -> tuple[dict[str, Any], str | None, str | None]:
        step = step_from_result(run_script(Path(path), func, asked.target), asked.target)
        report = memory_report(step, asked)
        written = write_viewer(report.rows[-1], Path(asked.output)) if asked.output else None
        return report.json, None if report.plan is None else str(report.plan), None if written is None else str(written)

    return call_with_large_stack(run)
