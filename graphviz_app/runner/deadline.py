"""A hard time limit inside a worker: the process ends at the deadline, even inside one long op.

A job may check its own clock (the expression language's evaluator does, between
operations); an operation it cannot interrupt (a slow torch kernel) would still
run to its end. In a worker process, `hard_deadline` arms the real-time
timer with SIGALRM at its default action, so the kernel ends the process at
the deadline whatever it is doing; the runner then reports a time-out
(`JobTimeout`) and starts a fresh worker. Outside a worker it does
nothing: ending the caller's own process is never an option.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator

__all__ = ["hard_deadline", "mark_worker_process", "in_worker_process", "HARD_DEADLINE_SIGNAL", "HARD_GRACE_S"]

HARD_DEADLINE_SIGNAL = getattr(signal, "SIGALRM", None)
# A job that stops itself at its own time limit gets this much longer before its worker is ended
# (the expression language: Limits.max_seconds, then one op still running HARD_GRACE_S later).
HARD_GRACE_S = 2.0
_in_worker = False


def mark_worker_process() -> None:
    """Called once by the worker loop, on its main thread: this process may be ended by `hard_deadline`."""
    global _in_worker
    if HARD_DEADLINE_SIGNAL is not None:
        signal.signal(HARD_DEADLINE_SIGNAL, signal.SIG_DFL)  # its default action ends the process
    _in_worker = True


def in_worker_process() -> bool:
    """Whether this process is an isolated worker (`mark_worker_process` was called)."""
    return _in_worker


@contextlib.contextmanager
def hard_deadline(seconds: float) -> Iterator[None]:
    """End this worker process if the block runs longer than `seconds` (POSIX; elsewhere no limit).

    >>> with hard_deadline(5.0):  # outside a worker: the block just runs
    ...     1 + 1
    2
    """
    if not _in_worker or HARD_DEADLINE_SIGNAL is None or not hasattr(signal, "setitimer"):
        yield
        return
    # From any thread (the CLI's jobs run on a big-stack one); the disposition was set at start.
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.001))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
