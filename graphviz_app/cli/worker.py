"""The command line's worker: one warm process of a shared runner that runs the person's program and can be stopped.

The CLI names its jobs (`graphviz_app.jobs.cli`) by reference: this side never
imports them, nor torch. A program in the language gets the language's warm-up
preloaded (`PROGRAMS`).
"""

from __future__ import annotations

from typing import Any

from ..expr.rehearsal import PRELOAD as LANGUAGE_PRELOAD
from ..model import Graph
from ..runner import JobRef, RunnerSettings, close_shared, shared_runner

__all__ = ["TRACE_JOB", "CHECK_JOB", "PROGRAMS", "MEMORY_LIMIT_BYTES", "run_job", "trace_program", "close"]

TRACE_JOB = JobRef("graphviz_app.jobs.cli", "trace_job")
CHECK_JOB = JobRef("graphviz_app.jobs.cli", "check_job")
# Programs hold at most 10^8 bytes of tensors (Limits.max_total_bytes); the rest is
# room for tracing. Past it the job stops with a message instead of swapping.
MEMORY_LIMIT_BYTES = 4 * 1024**3
# One command, one job at a time; the time limit is the command's --timeout, given per job.
PROGRAMS = RunnerSettings(workers=1, max_workers=1, time_limit=300.0, memory_limit=MEMORY_LIMIT_BYTES,
                          preload=(*LANGUAGE_PRELOAD, "graphviz_app.tracing.tracer", "graphviz_app.jobs.cli"),
                          max_jobs_per_worker=50, name="graphviz-app-cli")
_NAME = "cli.programs"


def run_job(job: JobRef, *args: Any, seconds: float) -> Any:
    """Run `job(*args)` in the CLI's worker, stopping it after `seconds`.

    Raises:
        RunnerError: ``JobTimeout`` past `seconds` (or its hard deadline), ``JobOutOfMemory`` past
            `MEMORY_LIMIT_BYTES`, ``WorkerCrashed`` when the worker died.
        Exception: the job's own errors, as raised (``ExprError``, ``TraceError``, ``GradcheckError``).
    """
    return shared_runner(_NAME, PROGRAMS).run(job, *args, time_limit=max(seconds, 0.1))


def trace_program(source: str, options: dict[str, Any], *, seconds: float) -> tuple[Graph, tuple[str, ...]]:
    """The program evaluated and traced in the worker, as a Graph, and notes for the person (`jobs.cli.trace_job`)."""
    text, notes = run_job(TRACE_JOB, source, options, seconds=seconds)
    return Graph.from_json(text), notes


def close() -> None:
    """Stop the worker (at exit; tests call it to start afresh)."""
    close_shared(_NAME)
