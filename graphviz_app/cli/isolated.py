"""The command line's worker: one warm process that runs the person's program and can be stopped."""

from __future__ import annotations

import atexit
import threading
from typing import TYPE_CHECKING, Any

from ..expr.errors import ExprError
from ..expr.isolation import IsolatedRunner
from ..expr.jobref import JobRef

if TYPE_CHECKING:
    from ..model import Graph

__all__ = ["TRACE_JOB", "CHECK_JOB", "MEMORY_LIMIT_BYTES", "run_program_job", "trace_program", "close"]

TRACE_JOB = JobRef("graphviz_app.cli.jobs", "trace_job")
CHECK_JOB = JobRef("graphviz_app.cli.jobs", "check_job")
# Programs hold at most 10^8 bytes of tensors (Limits.max_total_bytes); the rest is
# room for tracing. Past it the job stops with a message instead of swapping.
MEMORY_LIMIT_BYTES = 4 * 1024**3
_PRELOAD = ("torch", "graphviz_app.expr.warm", "graphviz_app.tracing.tracer", "graphviz_app.cli.jobs")

_runner: IsolatedRunner | None = None
_lock = threading.Lock()


def _shared() -> IsolatedRunner:
    global _runner
    with _lock:
        if _runner is None:
            _runner = IsolatedRunner(workers=1, max_workers=1, time_limit=300.0, memory_limit=MEMORY_LIMIT_BYTES,
                                     preload=_PRELOAD, max_jobs_per_worker=50)
            atexit.register(close)
        return _runner


def run_program_job(job: JobRef, *args: Any, seconds: float) -> Any:
    """Run `job(*args)` in the CLI's worker, stopping it after `seconds`.

    Raises:
        ExprError: the job's own errors, as raised; ``kind="time"`` past `seconds` (or its hard deadline);
            ``"memory"`` past `MEMORY_LIMIT_BYTES`; ``"crash"`` when the worker died.
    """
    runner = _shared()
    try:
        return runner.run(job, *args, time_limit=max(seconds, 0.1))
    except ExprError as e:
        if e.kind == "busy":  # one command, one job at a time: only a caller's own threads get here
            raise ExprError("the command's worker process is busy with another job", kind="busy") from e
        raise


def trace_program(source: str, *, device: str | None, dtype: str | None, show_saved: bool,
                  max_nodes: int | None, gradients: bool, seconds: float) -> Graph:
    """The program evaluated and traced in the worker, as a Graph (see `jobs.trace_job`)."""
    from ..model import Graph

    text = run_program_job(TRACE_JOB, source, device, dtype, show_saved, max_nodes, gradients, seconds=seconds)
    return Graph.from_json(text)


def close() -> None:
    """Stop the worker (at exit; tests call it to start afresh)."""
    global _runner
    with _lock:
        runner, _runner = _runner, None
    if runner is not None:
        runner.close()
