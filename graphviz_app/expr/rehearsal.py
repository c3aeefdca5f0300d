"""A program's first run in an isolated worker, so one long operation cannot outlast its time limit here.

The evaluator checks its clock between operations; an operation nobody costed
runs to its end, and a process cannot stop a torch call it is inside. So the
library's `evaluate` first runs the program in a worker process that is ended
inside any operation still running `HARD_GRACE_S` past `Limits.max_seconds`
(`runner.deadline`), and runs it in the caller's process, for live tensors and
their autograd graph, only once it finished there. One warm worker of the shared
runner `REHEARSAL` serves the whole process; it starts on first use and stops at
exit (or at `close()`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ..runner import HARD_GRACE_S, IsolatedRunner, JobRef, RunnerError, RunnerSettings, close_shared, shared_runner
from .errors import ExprError
from .limits import Limits

if TYPE_CHECKING:
    import torch

__all__ = ["rehearse", "runner", "close", "REHEARSAL", "SETTINGS", "PRELOAD"]

# What a worker running the language imports once: torch, and the evaluator warmed up.
PRELOAD = ("torch", "graphviz_app.expr.warm")
REHEARSAL = "expr.rehearsal"
# One torch thread, like every runner's workers: they fork from a forkserver that has run
# torch, and a parallel region in a child forked after its thread pool started hangs.
SETTINGS = RunnerSettings(workers=1, max_workers=2, time_limit=60.0, memory_limit=None, threads=1, preload=PRELOAD,
                          name="graphviz-app-rehearsal")
_JOB = JobRef("graphviz_app.expr.jobs", "evaluate_job")
# The runner's own limit backs up the worker's hard deadline (which ends it first).
_BACKSTOP_S = 5.0


def rehearse(source: str, *, limits: Limits, device: str | None, dtype: torch.dtype | None) -> None:
    """Run the program in the shared worker; raise if it had to be stopped there.

    Raises:
        ExprError: ``kind="time"`` when the program ran past ``limits.max_seconds``
            (between operations, or inside one: then the worker was ended
            `HARD_GRACE_S` later); ``"crash"`` when it crashed the worker;
            ``"busy"`` when every worker was taken. The program's other errors are
            not raised here: the run in the caller's process raises them.
    """
    if math.isinf(limits.max_seconds):
        return  # no time limit to keep
    dtype_name = None if dtype is None else str(dtype).removeprefix("torch.")
    try:
        runner().run(_JOB, source, limits, device, dtype_name,
                     time_limit=limits.max_seconds + HARD_GRACE_S + _BACKSTOP_S)
    except ExprError as e:
        if e.kind != "time":
            return  # the run here raises it again, with its live context
        # A fresh error: the worker's traceback note says nothing about the program.
        raise ExprError(e.message, line=e.line, col=e.col, kind=e.kind, source_line=e.source_line) from None
    except RunnerError as e:
        if e.kind == "time":  # the worker was ended, not the program's own clock
            raise ExprError(
                f"the program ran past its time limit of {limits.max_seconds:g} s (Limits.max_seconds) "
                f"and was stopped inside one operation, {HARD_GRACE_S:g} s later, by ending the isolated "
                "worker process evaluate() runs it in first: use smaller tensors or fewer loop "
                "iterations, or raise Limits.max_seconds", kind="time") from None
        if e.kind in ("crash", "busy"):
            raise ExprError(e.message, kind=e.kind) from None
        # Anything else the runner says (a result that could not come back) the run here settles.


def runner() -> IsolatedRunner:
    """The process's rehearsal runner (`SETTINGS`), started on first use."""
    return shared_runner(REHEARSAL, SETTINGS)


def close() -> None:
    """Stop the shared worker (a later `evaluate` starts a fresh one)."""
    close_shared(REHEARSAL)
