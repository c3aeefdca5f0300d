"""A program's first run in an isolated worker, so one long operation cannot outlast its time limit here.

The evaluator checks its clock between operations; an operation nobody costed
runs to its end, and a process cannot stop a torch call it is inside. So the
library's `evaluate` first runs the program in a worker process that is ended
inside any operation still running `HARD_GRACE_S` past `Limits.max_seconds`
(`expr.deadline`), and runs it in the caller's process, for live tensors and
their autograd graph, only once it finished there. One warm worker serves the
whole process; it starts on first use and stops at exit (or at `close()`).
"""

from __future__ import annotations

import atexit
import math
import threading

import torch

from .deadline import HARD_GRACE_S
from .errors import ExprError
from .isolation import IsolatedRunner
from .jobref import JobRef
from .limits import Limits

__all__ = ["rehearse", "shared_runner", "close", "STOPPING_KINDS"]

_JOB = JobRef("graphviz_app.expr.jobs", "evaluate_job")
# What the worker's answer can say that running the program here would only repeat
# or make worse (a hang, a crash of the caller's process); anything else, the
# program's own error included, comes from the run here, as it always did.
STOPPING_KINDS = frozenset({"time", "crash", "busy"})
# The runner's own limit backs up the worker's hard deadline (which ends it first).
_BACKSTOP_S = 5.0

_runner: IsolatedRunner | None = None
_lock = threading.Lock()


def shared_runner() -> IsolatedRunner:
    """The process's rehearsal runner, started on first use and closed at exit."""
    global _runner
    with _lock:
        if _runner is None:
            # One torch thread, like every runner's workers: they fork from a forkserver that has run
            # torch, and a parallel region in a child forked after its thread pool started hangs.
            _runner = IsolatedRunner(workers=1, max_workers=2, time_limit=60.0, memory_limit=None, threads=1)
        return _runner


def rehearse(source: str, *, limits: Limits, device: str | None, dtype: torch.dtype | None) -> None:
    """Run the program in the shared worker; raise if it had to be stopped there.

    Raises:
        ExprError: ``kind="time"`` when the program ran past ``limits.max_seconds``
            (between operations, or inside one: then the worker was ended
            `HARD_GRACE_S` later); ``"crash"`` when it crashed the worker;
            ``"busy"`` when every worker was taken. The program's own errors are
            not raised here: the run in the caller's process raises them.
    """
    if math.isinf(limits.max_seconds):
        return  # no time limit to keep
    dtype_name = None if dtype is None else str(dtype).removeprefix("torch.")
    try:
        shared_runner().run(_JOB, source, limits, device, dtype_name,
                            time_limit=limits.max_seconds + HARD_GRACE_S + _BACKSTOP_S)
    except ExprError as e:
        if e.kind not in STOPPING_KINDS:
            return
        if e.kind == "time" and e.line is None:  # the worker was ended, not the program's own clock
            raise ExprError(
                f"the program ran past its time limit of {limits.max_seconds:g} s (Limits.max_seconds) "
                f"and was stopped inside one operation, {HARD_GRACE_S:g} s later, by ending the isolated "
                "worker process evaluate() runs it in first: use smaller tensors or fewer loop "
                "iterations, or raise Limits.max_seconds", kind="time") from None
        # A fresh error: the worker's traceback note says nothing about the program.
        raise ExprError(e.message, line=e.line, col=e.col, kind=e.kind, source_line=e.source_line) from None


def close() -> None:
    """Stop the shared worker (at exit; a later `evaluate` starts a fresh one)."""
    global _runner
    with _lock:
        runner, _runner = _runner, None
    if runner is not None:
        runner.close()


atexit.register(close)
