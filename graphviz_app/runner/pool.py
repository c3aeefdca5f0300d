"""Run jobs in warm worker processes with a wall-time and a memory limit.

The web page evaluates text typed by strangers, and the CLI runs the person's
own scripts. Even a checked program can ask for a long matmul, so every run
happens in a separate process that can be killed: a runaway job is stopped at
its time limit, its worker replaced, and the caller carries on. How to use it::

    # mypkg/jobs.py -- a top-level function of an importable module (the worker
    # imports it by name); arguments and result must be picklable, so return
    # plain data (DOT text, dicts, frozen records), never live tensors.
    def draw(source: str) -> str:
        ...

    # in the caller, from any thread:
    with IsolatedRunner(time_limit=5) as runner:
        svg = runner.run(JobRef("mypkg.jobs", "draw"), source)  # or raises RunnerError

Errors: the job's own exceptions come back as they were raised; running out
of time, out of memory or crashing the process raise `JobTimeout`,
`JobOutOfMemory` or `WorkerCrashed` (all `RunnerError`s). A busy pool (all
``max_workers`` running) waits up to the call's time limit, then raises
`RunnerBusy`. For a runner shared by a whole process, see `shared.shared_runner`.

Workers start from a forkserver with the `preload` modules already imported
(POSIX), so a replacement is ready in a fraction of a second; elsewhere they
are spawned. Each worker runs one job at a time; ``run`` may be called from
many threads.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from .errors import JobCancelled, JobNotPortable, JobOutOfMemory, JobTimeout, RunnerBusy, WorkerCrashed
from .jobref import JobRef
from .priority import set_nice
from .process import (
    Cancelled,
    Worker,
    context,
    crash_of,
    ended_by_hard_deadline,
    start_worker,
    stop_worker,
    wait_for_answer,
)
from .usage import CpuClock, JobUsage

__all__ = ["IsolatedRunner"]


class IsolatedRunner:
    """A small pool of warm worker processes; thread-safe.

    Args:
        workers: Workers kept warm (0: started on demand, none started again after a kill;
            a command's one job).
        max_workers: Most workers at once; more callers wait for a free one.
        time_limit: Default wall-time limit per job, in seconds.
        memory_limit: Default bytes a job may add to its worker's address
            space (Linux; None for no limit).
        threads: Torch threads per worker.
        preload: Modules the forkserver imports once, so workers start warm
            (the modules your jobs use, and anything that warms them up).
        max_jobs_per_worker: Recycle a worker after this many jobs.
        name: The worker processes' name (what `ps` shows).
    """

    def __init__(
        self, *, workers: int = 2, max_workers: int = 4, time_limit: float = 10.0,
        memory_limit: int | None = 2 * 1024**3, threads: int = 1, preload: Sequence[str] = (),
        max_jobs_per_worker: int = 200, name: str = "graphviz-app-worker",
    ) -> None:
        if not 0 <= workers <= max_workers or max_workers < 1:
            raise ValueError(f"need 0 <= workers <= max_workers and max_workers >= 1, got workers={workers}, "
                             f"max_workers={max_workers}")
        self.workers, self.max_workers = workers, max_workers
        self.time_limit, self.memory_limit = time_limit, memory_limit
        self.threads, self.max_jobs_per_worker = threads, max_jobs_per_worker
        self.name = name
        self._ctx = context(preload)
        self._cond = threading.Condition()
        self._local = threading.local()  # the last job's usage, per calling thread
        self._idle: list[Worker] = []
        self._count = 0  # live or starting workers
        self._closed = False

    # public -------------------------------------------------------------
    def run(self, job: Callable[..., Any] | JobRef, *args: Any, time_limit: float | None = None,
            memory_limit: int | None = None, cancel: threading.Event | None = None, nice: int = 0,
            demote: tuple[float, int] | None = None) -> Any:
        """Run ``job(*args)`` in a worker and return its result.

        Args:
            job: A picklable top-level function, or a `JobRef` naming one (then this
                process never imports it: only the worker does).
            *args: Its picklable arguments.
            time_limit: Seconds before the job is killed (default: the runner's).
            memory_limit: Bytes the job may allocate (default: the runner's).
            cancel: Set it (from any thread) to stop the job: its worker is
                killed and replaced, as at the time limit.
            nice: Lower the job's CPU priority by this much (0 to 19; POSIX): the
                pool's other jobs get the CPU first (`priority`). Its worker is
                raised back afterwards, or retired where that is not allowed.
            demote: ``(seconds, nice)``: a job still running after `seconds` is lowered to
                `nice` (a job expected to be quick that is not yields the CPU from then on).

        Raises:
            JobTimeout: past the time limit, or the hard deadline the job set.
            JobOutOfMemory: past the memory limit.
            WorkerCrashed: the worker died (a signal, or an exit code such as ``os._exit(7)``'s).
            RunnerBusy: all workers stayed busy for the time limit.
            JobCancelled: stopped through `cancel`.
            JobNotPortable: the job, its arguments or its result cannot be pickled.
            Exception: whatever the job raised, re-raised here.
        """
        limit = self.time_limit if time_limit is None else time_limit
        memory = self.memory_limit if memory_limit is None else memory_limit
        self._local.usage = None  # a job that never starts (busy, not picklable) measured nothing
        for attempt in range(2):
            worker = self._acquire(wait=limit)
            if nice > 0 and set_nice(worker.process.pid, nice):
                worker.nice = nice
            try:
                worker.conn.send((job, args, memory))
            except (BrokenPipeError, ConnectionResetError, EOFError):
                self._retire(worker)  # died while idle: try a fresh one once
                if attempt:
                    raise WorkerCrashed("the worker process died before the job started") from None
                continue
            except Exception as e:  # noqa: BLE001 - pickling failed; nothing was sent
                self._release(worker)
                raise JobNotPortable(
                    f"the job and its arguments must be picklable (a top-level function of an "
                    f"importable module): {type(e).__name__}: {e}") from e
            return self._collect(worker, limit, memory, cancel, CpuClock(worker.process.pid), demote)
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
            WorkerCrashed: a worker could not start.
        """
        while True:
            with self._cond:
                if self._count >= self.workers or self._closed:
                    return
                self._count += 1
            try:
                worker = start_worker(self._ctx, self.threads, self.name)
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
            stop_worker(worker)

    @property
    def closed(self) -> bool:
        """Whether `close` was called: a closed runner runs no more jobs."""
        return self._closed

    def __enter__(self) -> IsolatedRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # internals ------------------------------------------------------------
    def _collect(self, worker: Worker, limit: float, memory: int | None, cancel: threading.Event | None,
                 clock: CpuClock, demote: tuple[float, int] | None = None) -> Any:
        self._local.usage = None
        try:
            ready = self._wait(worker, limit, cancel, demote, clock)
            message: Any = worker.conn.recv() if ready else None
        except (EOFError, OSError):
            self._local.usage = clock.stop()
            self._retire(worker)
            if ended_by_hard_deadline(worker):
                raise JobTimeout(
                    "the job ran longer than the time limit it set for one step and was stopped inside one "
                    "operation: use smaller tensors or fewer loop iterations") from None
            raise crash_of(worker) from None
        except Cancelled:
            self._retire(worker)
            raise JobCancelled("the job was stopped before it finished, as asked") from None
        # Measured before a time-out's kill: what the worker and its layout program got.
        self._local.usage = clock.stop(children_running=not ready)
        if not ready:
            self._retire(worker)
            raise JobTimeout(f"the job ran longer than its time limit of {round(limit, 1):g} s and was stopped: "
                             "use smaller tensors or fewer loop iterations")
        worker.jobs += 1
        status = message[0]
        if status == "memory":
            self._retire(worker)  # a failed allocation can leave odd state behind
            held = f"its memory limit ({_gib(memory)})" if memory is not None else "the machine's memory"
            raise JobOutOfMemory(f"the job ran out of {held}: use smaller tensors")
        self._release(worker)
        if status == "error":
            exc = message[1]
            if message[2]:
                exc.add_note("Traceback in the worker process:\n" + message[2])
            raise exc
        return message[1]

    @staticmethod
    def _wait(worker: Worker, limit: float, cancel: threading.Event | None,
              demote: tuple[float, int] | None, clock: CpuClock) -> bool:
        """Wait for the job's answer, its CPU sampled; lower the worker's priority once the job outlasts
        `demote`'s seconds."""
        if demote is None or demote[0] >= limit:
            return wait_for_answer(worker.conn, limit, cancel, clock.sample)
        after, nice = demote
        if wait_for_answer(worker.conn, after, cancel, clock.sample):
            return True
        if nice > worker.nice and set_nice(worker.process.pid, nice):
            worker.nice = nice
        return wait_for_answer(worker.conn, limit - after, cancel, clock.sample)

    def _acquire(self, *, wait: float) -> Worker:
        deadline = time.monotonic() + wait
        with self._cond:
            while True:
                if self._closed:
                    raise WorkerCrashed("the isolated runner is closed")
                if self._idle:
                    return self._idle.pop()
                if self._count < self.max_workers:
                    self._count += 1
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise RunnerBusy(f"all {self.max_workers} workers are busy: try again in a moment")
                self._cond.wait(remaining)
        try:
            return start_worker(self._ctx, self.threads, self.name)
        except BaseException:
            with self._cond:
                self._count -= 1
                self._cond.notify()
            raise

    def _release(self, worker: Worker) -> None:
        if worker.jobs >= self.max_jobs_per_worker:
            self._retire(worker)
            return
        if worker.nice:  # the next job must not inherit a lowered priority
            if not set_nice(worker.process.pid, 0):
                self._retire(worker)  # raising it back needs a privilege this process lacks
                return
            worker.nice = 0
        with self._cond:
            if not self._closed:
                self._idle.append(worker)
                self._cond.notify()
                return
        self._retire(worker)

    def _retire(self, worker: Worker) -> None:
        stop_worker(worker)
        with self._cond:
            self._count -= 1
            self._cond.notify()
            refill = not self._closed and self._count < self.workers
            if refill:
                self._count += 1
        if refill:  # keep the pool warm without making this caller wait
            threading.Thread(target=self._add_started, name="runner-worker-refill", daemon=True).start()

    def _add_started(self) -> None:
        try:
            worker = start_worker(self._ctx, self.threads, self.name)
        except Exception:  # noqa: BLE001 - a later call starts one on demand
            with self._cond:
                self._count -= 1
                self._cond.notify()
            return
        self._release(worker)


def _gib(n: int) -> str:
    return f"{n / 1024**3:.1f} GiB"
