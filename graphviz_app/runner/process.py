"""One worker process of the pool: start it, wait for its answer, stop it, and say how it ended."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from .deadline import HARD_DEADLINE_SIGNAL
from .errors import WorkerCrashed
from .worker import worker_main

__all__ = ["Worker", "Cancelled", "context", "start_worker", "stop_worker", "wait_for_answer",
           "ended_by_hard_deadline", "crash_of", "START_TIMEOUT_S"]

START_TIMEOUT_S = 120.0  # a cold start imports torch; generous on a busy machine
_CANCEL_POLL_S = 0.05  # how soon a cancelled job's worker is killed
_TICK_S = 1.0  # how often a waiting caller samples the job (its CPU clock)


@dataclass
class Worker:
    """A started worker process, the parent's end of its pipe, and the jobs it ran."""

    process: Any
    conn: Connection
    jobs: int = 0
    nice: int = 0  # lowered by this much for its current job (priority.set_nice)


class Cancelled(Exception):
    """The caller set the job's cancel event."""


def context(preload: Sequence[str]) -> Any:
    """A multiprocessing context: a forkserver that imported `preload` once (POSIX), else spawn.

    A process has one forkserver, started by its first runner's first worker: the
    modules it preloads are those named by the last runner made before then.
    """
    if "forkserver" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("forkserver")
        if preload:  # an empty list would undo what another runner asked for
            ctx.set_forkserver_preload(list(preload))
        return ctx
    return multiprocessing.get_context("spawn")


def start_worker(ctx: Any, threads: int, name: str) -> Worker:
    """A new worker, started and ready for its first job.

    Raises:
        WorkerCrashed: it did not start within `START_TIMEOUT_S`, or died starting.
    """
    parent, child = ctx.Pipe(duplex=True)
    process = ctx.Process(target=worker_main, args=(child, threads), name=name, daemon=True)
    with _without_main_module():
        process.start()
    child.close()
    worker = Worker(process, parent)
    if not parent.poll(START_TIMEOUT_S):
        stop_worker(worker)
        raise WorkerCrashed(f"a worker process did not start within {START_TIMEOUT_S:g} s: the machine may be "
                            "very busy; try again in a moment")
    try:
        parent.recv()  # ("ready", pid)
    except (EOFError, OSError) as e:
        stop_worker(worker)
        raise crash_of(worker, "while starting") from e
    return worker


def wait_for_answer(conn: Connection, limit: float, cancel: threading.Event | None,
                    tick: Callable[[], None] | None = None) -> bool:
    """True when the worker answered within `limit` seconds; raises Cancelled when `cancel` is set first.

    `tick` runs about once a second while the job runs: the job's CPU clock samples there, so a
    worker that dies (a hard deadline) still leaves a measurement of the CPU it got.
    """
    if cancel is None and tick is None:
        return conn.poll(limit)
    step = _CANCEL_POLL_S if cancel is not None else _TICK_S
    deadline = time.monotonic() + limit
    next_tick = time.monotonic() + _TICK_S
    while True:
        left = deadline - time.monotonic()
        if conn.poll(max(0.0, min(left, step))):
            return True
        if cancel is not None and cancel.is_set():
            raise Cancelled
        if tick is not None and time.monotonic() >= next_tick:
            tick()
            next_tick = time.monotonic() + _TICK_S
        if left <= step:
            return conn.poll(0)


def stop_worker(worker: Worker) -> None:
    """End the worker and everything in its process group (a `dot` it started), and reap it."""
    try:
        worker.conn.close()
    except OSError:
        pass
    if worker.process.is_alive():
        worker.process.kill()
    if hasattr(os, "killpg") and worker.process.pid is not None:
        try:  # the worker's group: children it started outlive it otherwise
            os.killpg(worker.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    worker.process.join(timeout=5)


def ended_by_hard_deadline(worker: Worker) -> bool:
    """Whether the worker ended at a job's `hard_deadline` (SIGALRM at its default action)."""
    worker.process.join(timeout=2)
    code = worker.process.exitcode
    return HARD_DEADLINE_SIGNAL is not None and code == -HARD_DEADLINE_SIGNAL


def crash_of(worker: Worker, during: str = "while running the job") -> WorkerCrashed:
    """The error that says how the worker died: the signal, or the exit code it gave (`os._exit(7)`)."""
    worker.process.join(timeout=2)
    code = worker.process.exitcode
    if code is not None and code < 0:
        name = signal.Signals(-code).name if -code in signal.valid_signals() else f"signal {-code}"
        why = " (usually the machine ran out of memory)" if -code == signal.SIGKILL else ""
        crash = -code in (signal.SIGFPE, signal.SIGSEGV, signal.SIGBUS, signal.SIGILL)
        fix = (": torch crashed inside the job (a bug or an unguarded operation); the job was "
               "stopped and a fresh worker replaces this one, so change the program and run it again"
               if crash else "")
        return WorkerCrashed(f"the worker process was killed by {name}{why} {during}{fix}", exit_code=code)
    return WorkerCrashed(f"the worker process exited with code {code} {during} (something it ran ended the "
                         "process, e.g. os._exit())", exit_code=code)


_main_swap_lock = threading.Lock()


@contextlib.contextmanager
def _without_main_module() -> Iterator[None]:
    """Start processes without making them import the parent's `__main__`.

    multiprocessing's forkserver and spawn children re-import the parent's main
    module (as `__mp_main__`); under Streamlit that is the page script, which
    would pull Streamlit into every worker. Jobs are top-level functions of
    importable modules, so workers never need it.
    """
    with _main_swap_lock:
        main = sys.modules["__main__"]
        sys.modules["__main__"] = types.ModuleType("__main__")
        # The forkserver is a new interpreter that imports the preloaded modules from
        # its own sys.path, built from PYTHONPATH: a relative entry (PYTHONPATH=.) would
        # be read from the current directory, which may have changed since this process
        # started, and the workers would run another copy of the package. It gets this
        # process's sys.path instead (Python 3.11's forkserver ignores the one it is sent).
        python_path = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        try:
            yield
        finally:
            sys.modules["__main__"] = main
            if python_path is None:
                os.environ.pop("PYTHONPATH", None)
            else:
                os.environ["PYTHONPATH"] = python_path
