"""Run jobs in warm worker processes with a wall-time and a memory limit.

The web page evaluates text typed by strangers. Even a checked program can
ask for a long matmul, so every run happens in a separate process that can
be killed: a runaway job is stopped at its time limit, its worker replaced,
and the server carries on. How to use it::

    # graphviz_app/web/jobs.py -- a top-level function of an importable
    # module (the worker imports it by name); arguments and result must be
    # picklable, so return plain data (DOT text, dicts), never live graphs.
    def draw(source: str) -> str:
        ev = evaluate(source)
        return render(trace(ev.output, params=ev.variables)).source

    # in the page, from any thread:
    svg = run_isolated(draw, source, time_limit=5)   # or raises ExprError

Errors: the job's own exceptions come back as they were raised (an
`ExprError` from `evaluate`, a `NoGradFnError` from `trace`, ...); running
out of time, out of memory or crashing the process raise `ExprError` with
``kind`` ``"time"``, ``"memory"`` or ``"crash"``. A busy pool (all
``max_workers`` running) waits up to the call's time limit, then raises
``ExprError(kind="busy")``.

Workers start from a forkserver with torch already imported (POSIX), so a
replacement is ready in a fraction of a second; elsewhere they are spawned.
Each worker runs one job at a time; ``run`` may be called from many threads.
"""

from __future__ import annotations

import atexit
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
from .errors import ExprError
from .jobref import JobRef
from .usage import CpuClock, JobUsage
from .worker import worker_main

__all__ = ["IsolatedRunner", "run_isolated", "default_runner"]

_START_TIMEOUT = 120.0  # a cold spawn imports torch; generous on a busy machine


@dataclass
class _Worker:
    process: Any
    conn: Connection
    jobs: int = 0


class IsolatedRunner:
    """A small pool of warm worker processes; thread-safe.

    Args:
        workers: Workers kept warm.
        max_workers: Most workers at once; more callers wait for a free one.
        time_limit: Default wall-time limit per job, in seconds.
        memory_limit: Default bytes a job may add to its worker's address
            space (Linux; None for no limit).
        threads: Torch threads per worker.
        preload: Modules the forkserver imports once, so workers start warm; keep
            ``graphviz_app.expr.warm`` in the list and add the modules your jobs use.
        max_jobs_per_worker: Recycle a worker after this many jobs.
    """

    def __init__(
        self, *, workers: int = 2, max_workers: int = 4, time_limit: float = 10.0,
        memory_limit: int | None = 2 * 1024**3, threads: int = 1,
        preload: Sequence[str] = ("torch", "graphviz_app.expr.warm"), max_jobs_per_worker: int = 200,
    ) -> None:
        if not 1 <= workers <= max_workers:
            raise ValueError(f"need 1 <= workers <= max_workers, got workers={workers}, max_workers={max_workers}")
        self.workers, self.max_workers = workers, max_workers
        self.time_limit, self.memory_limit = time_limit, memory_limit
        self.threads, self.max_jobs_per_worker = threads, max_jobs_per_worker
        methods = multiprocessing.get_all_start_methods()
        self._ctx = (
            multiprocessing.get_context("forkserver") if "forkserver" in methods
            else multiprocessing.get_context("spawn")
        )
        if self._ctx.get_start_method() == "forkserver":
            self._ctx.set_forkserver_preload(list(preload))
        self._cond = threading.Condition()
        self._local = threading.local()  # the last job's usage, per calling thread
        self._idle: list[_Worker] = []
        self._count = 0  # live or starting workers
        self._closed = False

    # public -------------------------------------------------------------
    def run(self, job: Callable[..., Any] | JobRef, *args: Any, time_limit: float | None = None,
            memory_limit: int | None = None, cancel: threading.Event | None = None) -> Any:
        """Run ``job(*args)`` in a worker and return its result.

        Args:
            job: A picklable top-level function, or a `JobRef` naming one (then this
                process never imports it: only the worker does).
            *args: Its picklable arguments.
            time_limit: Seconds before the job is killed (default: the runner's).
            memory_limit: Bytes the job may allocate (default: the runner's).
            cancel: Set it (from any thread) to stop the job: its worker is
                killed and replaced, as at the time limit.

        Raises:
            ExprError: time limit (``kind="time"``), memory limit (``"memory"``),
                the worker died (``"crash"``), all workers busy (``"busy"``),
                stopped through `cancel` (``"cancelled"``), or a job that
                cannot be pickled (``"input"``).
            Exception: whatever the job raised, re-raised here.
        """
        limit = self.time_limit if time_limit is None else time_limit
        memory = self.memory_limit if memory_limit is None else memory_limit
        for attempt in range(2):
            worker = self._acquire(wait=limit)
            try:
                worker.conn.send((job, args, memory))
            except (BrokenPipeError, ConnectionResetError, EOFError):
                self._retire(worker)  # died while idle: try a fresh one once
                if attempt:
                    raise ExprError("the worker process died before the job started", kind="crash") from None
                continue
            except Exception as e:  # noqa: BLE001 - pickling failed; nothing was sent
                self._release(worker)
                raise ExprError(
                    f"the job and its arguments must be picklable (a top-level function of an "
                    f"importable module): {type(e).__name__}: {e}", kind="input") from e
            return self._collect(worker, limit, cancel, CpuClock(worker.process.pid))
        raise AssertionError("unreachable")

    def last_usage(self) -> JobUsage | None:
        """The wall and CPU time of the last job this thread ran (also one that timed out), or None.

        `JobUsage.busy` says whether other programs took the CPU it needed: a
        time-out is worth a retry only then.
        """
        return getattr(self._local, "usage", None)

    def warm_up(self) -> None:
        """Start the warm workers now instead of on the first job.

        Raises:
            ExprError: a worker could not start (``kind="crash"``).
        """
        while True:
            with self._cond:
                if self._count >= self.workers or self._closed:
                    return
                self._count += 1
            try:
                worker = self._start()
            except BaseException:
                with self._cond:
                    self._count -= 1
                    self._cond.notify()
                raise
            self._release(worker)

    def close(self) -> None:
        """Stop all idle workers; busy ones stop when their job ends."""
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._count -= len(idle)
            self._cond.notify_all()
        for worker in idle:
            _stop(worker)

    def __enter__(self) -> IsolatedRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # internals ------------------------------------------------------------
    def _collect(self, worker: _Worker, limit: float, cancel: threading.Event | None, clock: CpuClock) -> Any:
        self._local.usage = None
        try:
            ready = _wait_for_answer(worker.conn, limit, cancel)
            message: Any = worker.conn.recv() if ready else None
        except (EOFError, OSError):
            self._local.usage = clock.stop()
            self._retire(worker)
            if _ended_by_hard_deadline(worker):
                raise ExprError(
                    "the job ran past the hard time limit it set for one step (expr.deadline) and was "
                    "stopped inside one operation: use smaller tensors or fewer loop iterations",
                    kind="time") from None
            raise ExprError(_death_message(worker), kind="crash") from None
        except _Cancelled:
            self._retire(worker)
            raise ExprError("the job was stopped before it finished, as asked", kind="cancelled") from None
        # Measured before a time-out's kill: what the worker and its layout program got.
        self._local.usage = clock.stop(children_running=not ready)
        if not ready:
            self._retire(worker)
            raise ExprError(
                f"the job ran longer than its time limit of {limit:g} s and was stopped: "
                "use smaller tensors or fewer loop iterations", kind="time")
        worker.jobs += 1
        status = message[0]
        if status == "memory":
            self._retire(worker)  # a failed allocation can leave odd state behind
            raise ExprError(
                f"the job ran out of its memory limit ({_gib(self.memory_limit)}): "
                "use smaller tensors", kind="memory")
        self._release(worker)
        if status == "error":
            exc = message[1]
            if message[2]:
                exc.add_note("Traceback in the worker process:\n" + message[2])
            raise exc
        return message[1]

    def _acquire(self, *, wait: float) -> _Worker:
        deadline = time.monotonic() + wait
        with self._cond:
            while True:
                if self._closed:
                    raise ExprError("the isolated runner is closed", kind="crash")
                if self._idle:
                    return self._idle.pop()
                if self._count < self.max_workers:
                    self._count += 1
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise ExprError(
                        f"all {self.max_workers} workers are busy: try again in a moment", kind="busy")
                self._cond.wait(remaining)
        try:
            return self._start()
        except BaseException:
            with self._cond:
                self._count -= 1
                self._cond.notify()
            raise

    def _release(self, worker: _Worker) -> None:
        if worker.jobs >= self.max_jobs_per_worker:
            self._retire(worker)
            return
        with self._cond:
            if not self._closed:
                self._idle.append(worker)
                self._cond.notify()
                return
        self._retire(worker)

    def _retire(self, worker: _Worker) -> None:
        _stop(worker)
        with self._cond:
            self._count -= 1
            self._cond.notify()
            refill = not self._closed and self._count < self.workers
            if refill:
                self._count += 1
        if refill:  # keep the pool warm without making this caller wait
            threading.Thread(target=self._add_started, name="expr-worker-refill", daemon=True).start()

    def _add_started(self) -> None:
        try:
            worker = self._start()
        except Exception:  # noqa: BLE001 - a later call starts one on demand
            with self._cond:
                self._count -= 1
                self._cond.notify()
            return
        self._release(worker)

    def _start(self) -> _Worker:
        parent, child = self._ctx.Pipe(duplex=True)
        process = self._ctx.Process(target=worker_main, args=(child, self.threads),
                                    name="graphviz-app-expr-worker", daemon=True)
        with _without_main_module():
            process.start()
        child.close()
        worker = _Worker(process, parent)
        if not parent.poll(_START_TIMEOUT):
            _stop(worker)
            raise ExprError(f"a worker process did not start within {_START_TIMEOUT:g} s", kind="crash")
        try:
            parent.recv()  # ("ready", pid)
        except (EOFError, OSError) as e:
            _stop(worker)
            raise ExprError(_death_message(worker), kind="crash") from e
        return worker


class _Cancelled(Exception):
    """The caller set the job's cancel event."""


_CANCEL_POLL_S = 0.05  # how soon a cancelled job's worker is killed


def _wait_for_answer(conn: Connection, limit: float, cancel: threading.Event | None) -> bool:
    """True when the worker answered within `limit` seconds; raises _Cancelled when `cancel` is set first."""
    if cancel is None:
        return conn.poll(limit)
    deadline = time.monotonic() + limit
    while True:
        left = deadline - time.monotonic()
        if conn.poll(max(0.0, min(left, _CANCEL_POLL_S))):
            return True
        if cancel.is_set():
            raise _Cancelled
        if left <= _CANCEL_POLL_S:
            return conn.poll(0)


def _stop(worker: _Worker) -> None:
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


def _ended_by_hard_deadline(worker: _Worker) -> bool:
    """Whether the worker ended at a job's `hard_deadline` (SIGALRM at its default action)."""
    worker.process.join(timeout=2)
    code = worker.process.exitcode
    return HARD_DEADLINE_SIGNAL is not None and code == -HARD_DEADLINE_SIGNAL


def _death_message(worker: _Worker) -> str:
    worker.process.join(timeout=2)
    code = worker.process.exitcode
    if code is not None and code < 0:
        name = signal.Signals(-code).name if -code in signal.valid_signals() else f"signal {-code}"
        why = " (usually the machine ran out of memory)" if -code == signal.SIGKILL else ""
        crash = -code in (signal.SIGFPE, signal.SIGSEGV, signal.SIGBUS, signal.SIGILL)
        fix = (": torch crashed inside the job (a bug or an unguarded operation); the job was "
               "stopped and a fresh worker replaces this one, so change the program and run it again"
               if crash else "")
        return f"the worker process was killed by {name}{why} while running the job{fix}"
    return f"the worker process exited (code {code}) while running the job"


def _gib(n: int | None) -> str:
    return "none" if n is None else f"{n / 1024**3:.1f} GiB"


_default: IsolatedRunner | None = None
_default_lock = threading.Lock()


def default_runner() -> IsolatedRunner:
    """The process-wide runner `run_isolated` uses, created on first use."""
    global _default
    with _default_lock:
        if _default is None:
            _default = IsolatedRunner()
            atexit.register(_default.close)
        return _default


def run_isolated(job: Callable[..., Any] | JobRef, *args: Any, time_limit: float | None = None,
                 memory_limit: int | None = None) -> Any:
    """``default_runner().run(job, *args, ...)``; see `IsolatedRunner.run`."""
    return default_runner().run(job, *args, time_limit=time_limit, memory_limit=memory_limit)
