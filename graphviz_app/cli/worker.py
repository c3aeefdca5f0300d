"""The command line's worker: a process of a shared runner that runs the person's program or script, stoppable.

The CLI names its jobs (`graphviz_app.jobs.cli`) by reference: this side never
imports them, nor torch. A program in the language gets the language's warm-up
preloaded (`PROGRAMS`); a script, torch and the tracer (`SCRIPTS`). One command
runs one job at a time and starts no spare worker (``workers=0``): a worker
stopped at the command's deadline is not replaced while the command exits.
"""

from __future__ import annotations

import os
from typing import Any

from ..expr.rehearsal import PRELOAD as LANGUAGE_PRELOAD
from ..model import Graph
from ..runner import JobRef, RunnerError, RunnerSettings, WorkerCrashed, close_shared, shared_runner

__all__ = ["TRACE_JOB", "CHECK_JOB", "SCRIPT_JOB", "MEMORY_JOB", "PROGRAMS", "SCRIPTS", "MEMORY_LIMIT_BYTES",
           "run_job", "run_script_job", "trace_program", "trace_script", "script_stopped", "close"]

TRACE_JOB = JobRef("graphviz_app.jobs.cli", "trace_job")
CHECK_JOB = JobRef("graphviz_app.jobs.cli", "check_job")
SCRIPT_JOB = JobRef("graphviz_app.jobs.cli", "script_trace_job")
MEMORY_JOB = JobRef("graphviz_app.jobs.cli", "memory_job")
# Programs hold at most 10^8 bytes of tensors (Limits.max_total_bytes); the rest is
# room for tracing. Past it the job stops with a message instead of swapping.
MEMORY_LIMIT_BYTES = 4 * 1024**3
# One command, one job at a time; the time limit is the command's --timeout, given per job.
PROGRAMS = RunnerSettings(workers=0, max_workers=1, time_limit=300.0, memory_limit=MEMORY_LIMIT_BYTES,
                          preload=(*LANGUAGE_PRELOAD, "graphviz_app.tracing.tracer", "graphviz_app.jobs.cli"),
                          max_jobs_per_worker=50, name="graphviz-app-cli")
# The person's own script on their own machine: no memory limit (a real model may need many GiB).
SCRIPTS = RunnerSettings(workers=0, max_workers=1, time_limit=300.0, memory_limit=None,
                         preload=("torch", "graphviz_app.tracing.tracer", "graphviz_app.jobs.cli"),
                         max_jobs_per_worker=50, name="graphviz-app-cli-script")
_NAME = "cli.programs"
_SCRIPTS_NAME = "cli.scripts"


def run_job(job: JobRef, *args: Any, seconds: float) -> Any:
    """Run `job(*args)` in the CLI's worker, stopping it after `seconds`.

    Raises:
        RunnerError: ``JobTimeout`` past `seconds` (or its hard deadline), ``JobOutOfMemory`` past
            `MEMORY_LIMIT_BYTES`, ``WorkerCrashed`` when the worker died.
        Exception: the job's own errors, as raised (``ExprError``, ``TraceError``, ``GradcheckError``).
    """
    return shared_runner(_NAME, PROGRAMS).run(job, *args, time_limit=max(seconds, 0.1))


def run_script_job(job: JobRef, *args: Any, seconds: float) -> Any:
    """Run `job(*args)`, a job that runs the person's script, in the CLI's script worker (see `run_job`)."""
    return shared_runner(_SCRIPTS_NAME, SCRIPTS).run(job, *args, time_limit=max(seconds, 0.1))


def trace_script(path: str, func: str, target: str, options: dict[str, Any], *, orders: bool,
                 seconds: float) -> Graph:
    """`func()` of the script called and what it returns traced in the worker (`jobs.cli.script_trace_job`)."""
    return Graph.from_json(run_script_job(SCRIPT_JOB, path, func, target, options, orders, os.getcwd(),
                                          seconds=seconds))


def trace_program(source: str, options: dict[str, Any], *, seconds: float) -> tuple[Graph, tuple[str, ...]]:
    """The program evaluated and traced in the worker, as a Graph, and notes for the person (`jobs.cli.trace_job`)."""
    text, notes = run_job(TRACE_JOB, source, options, seconds=seconds)
    return Graph.from_json(text), notes


def close() -> None:
    """Stop the worker (at exit; tests call it to start afresh)."""
    close_shared(_NAME)
    close_shared(_SCRIPTS_NAME)


def script_stopped(target: str, e: RunnerError, timeout: float) -> str:
    """What to tell the person when the worker running their `SCRIPT.py:FUNC` had to stop.

    >>> script_stopped("m.py:build", WorkerCrashed("the worker exited", exit_code=7), 300)[:60]
    'm.py:build ended the process running it with exit code 7 (os'
    """
    if e.kind == "time":
        return (f"{target} ran longer than the command's --timeout of {timeout:g} s (the function, tracing and "
                "drawing share it) and was stopped: make it do less, or give a larger --timeout")
    if isinstance(e, WorkerCrashed) and e.exit_code is not None and e.exit_code >= 0:
        return (f"{target} ended the process running it with exit code {e.exit_code} (os._exit(), or a library "
                "that exits) before returning, so there is nothing to draw: let the function return its "
                "output (or model and inputs) instead of exiting")
    return f"{target} could not finish: {e.message}"
