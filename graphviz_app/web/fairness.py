"""Share the worker pool fairly between the page's sessions: one job each, runaways last.

The isolated runner hands a free worker to whichever caller wakes first, so a
few sessions sending runaway programs (each holding a worker until its time
limit) starve everyone else. `FairRunner` sits in front of it:

- each session runs at most `per_session` jobs at once; a newer job from a
  session replaces its older job that is still waiting (the older one is
  answered "cancelled" at once), and stops its running job of the same kind
  (the same job function: a new program replaces the one still running);
- a session that waits through `SessionRunner` with an `on_wait` check (the
  page: a newer click of Run interrupts the wait) leaves its job running when
  the check raises, and a later wait for the same job takes it up again
  instead of starting it over;
- a session whose job ran past the time limit in the last `suspect_s` seconds
  is a suspect, and so is any job repeating one that did (the same job function
  and first argument: a runaway link opened by many visitors, or in new tabs):
  suspects go last and hold at most `suspect_slots` workers, so the other
  workers stay free for everyone else;
- the last `reserved_slots` workers are kept for light jobs, light by
  measurement first (`lanes.lane`): the CPU seconds the runner measured for
  each program and each session's last job are kept (`lanes.CostBook`), so a
  program that took more than `light_s` before is heavy next time whatever its
  text says, one that took less is light, and a session whose last job ran
  long sends its next new program down the heavy lane. Only a program never
  measured is judged by its text (`program_cost.judge`), or, when the text
  says nothing (not a program, sizes that are not literals), by its session's
  last job. A heavy job waits for the other workers: a runaway never takes the
  last free worker, and no running job is stopped to make room (a stop kills a
  worker, and starting another costs more than it gains on a busy machine);
- each job runs at its lane's CPU priority (`lanes.NICE`: light 0, heavy 10,
  suspects 19), so on a machine with fewer cores than workers the runaways
  yield the CPU to the small programs beside them instead of sharing it evenly;
  a light job still running after `lanes.DEMOTE_S` is lowered to the heavy
  priority (a runaway whose text looked small takes the CPU for seconds, not
  for its whole time limit), and its cost is measured for next time;
- a job waits at most `max_wait_s` (suspects `suspect_wait_s`) for a worker,
  then is answered "busy" instead of waiting out a runaway.

A time-out is re-labelled by what the machine did to it, measured: the CPU time
its worker (and the layout program it started) got against the wall time it ran
(`IsolatedRunner.last_usage`). `overtime` when it had a CPU to itself (it will
time out again: not worth a retry), `time` when other programs took the CPU it
needed (it may pass at a quieter moment). A layout stopped at its deadline
because the machine was busy becomes `time` too, so it is never cached.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import pickle
import threading
import time
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any

from ..runner import IsolatedRunner, JobCancelled, JobRef, JobUsage, RunnerBusy, RunnerError
from .lanes import DEMOTE_S, NICE, CostBook, Lane, lane
from .program_cost import Verdict, judge
from .relabel import relabel_layout_time_out, relabel_time_out
from .results import Failure

# A job: a picklable top-level function, or one named by module and function.
Job = Callable[..., Any] | JobRef

__all__ = ["FairRunner", "SessionRunner"]


@dataclass(eq=False, slots=True)
class _Ticket:
    session: str
    seq: int
    lane: Lane
    kind: str = ""  # the job function: a newer job of the same kind stops this one
    digest: str = ""  # the function and its arguments: `start` takes up the same job again
    cancelled: bool = False
    peak: int = 0  # most jobs running at once while this one ran
    stop: threading.Event = field(default_factory=threading.Event)

    @property
    def suspect(self) -> bool:
        return self.lane == "suspect"

    @property
    def light(self) -> bool:  # may take the workers kept for light jobs
        return self.lane == "light"


class FairRunner:
    """An `IsolatedRunner` shared fairly between sessions; thread-safe.

    Args:
        runner: The pool the jobs run in.
        slots: Jobs running at once (default: the runner's `max_workers`).
        per_session: Jobs one session may run at once.
        max_wait_s: Seconds a job waits for a worker before it is answered "busy".
        suspect_s: Seconds a session stays a suspect after a time-out.
        suspect_slots: Workers suspects may hold at once (default: half the slots).
        suspect_wait_s: Seconds a suspect's job waits for a worker.
        reserved_slots: Workers kept for jobs judged light (default: a quarter of the slots).
        light_s: The most CPU seconds (wall where not measured) a light job takes.
        judge: Judges a program's text before it runs: "light", "heavy" or "unknown".
    """

    def __init__(
        self, runner: IsolatedRunner, *, slots: int | None = None, per_session: int = 1,
        max_wait_s: float = 10.0, suspect_s: float = 60.0, suspect_slots: int | None = None,
        suspect_wait_s: float = 2.0, reserved_slots: int | None = None, light_s: float = 2.0,
        judge: Callable[[str], Verdict] = judge, clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.runner = runner
        self.slots = slots or runner.max_workers
        self.per_session, self.max_wait_s = per_session, max_wait_s
        self.suspect_s, self.suspect_wait_s = suspect_s, suspect_wait_s
        self.suspect_slots = suspect_slots or max(1, self.slots // 2)
        self.reserved_slots = self.slots // 4 if reserved_slots is None else reserved_slots
        self.light_s, self._judge = light_s, judge
        self._clock = clock
        self._cond = threading.Condition()
        self._seq = itertools.count()
        self._waiting: list[_Ticket] = []
        self._running: list[_Ticket] = []
        self._timed_out: dict[Hashable, float] = {}  # session or job key -> when it last timed out
        self._detached: dict[tuple[str, str], Future[Any]] = {}  # (session, job digest) -> its running job
        # What the runner measured: ("program", key) -> the program's last run, ("session", name) -> the page's.
        self._costs = CostBook(keep_s=max(suspect_s, 600.0), clock=clock)

    @property
    def time_limit(self) -> float:
        """The runner's time limit per job, in seconds."""
        return self.runner.time_limit

    def for_session(self, session: str, *, on_wait: Callable[[], None] | None = None) -> SessionRunner:
        """A runner whose jobs count as `session`'s; see `SessionRunner`."""
        return SessionRunner(self, session, on_wait=on_wait)

    def start(self, session: str, job: Job, *args: Any) -> Future[Any]:
        """``run(session, job, *args)`` on a thread of its own; the same job of the session
        still running is taken up again instead of started twice."""
        key = (session, _digest(job, args))
        with self._cond:
            running = self._detached.get(key)
            if running is not None:
                return running
            future: Future[Any] = Future()
            self._detached[key] = future

        def target() -> None:
            try:
                future.set_result(self._run(session, job, args, key[1]))
            except BaseException as e:  # noqa: BLE001 - handed to whoever waits for it
                future.set_exception(e)
            finally:
                with self._cond:
                    if self._detached.get(key) is future:
                        del self._detached[key]

        threading.Thread(target=target, name="graphviz-app-session-job", daemon=True).start()
        return future

    def run(self, session: str, job: Job, *args: Any) -> Any:
        """Run ``job(*args)`` for `session` when its turn comes; see `IsolatedRunner.run`.

        Raises:
            RunnerBusy: no worker within the wait.
            JobCancelled: a newer job of the session replaced it.
            JobTimeout: the time limit, ``kind`` ``"overtime"`` (it had a CPU to itself)
                or ``"time"`` (beside others).
            Exception: whatever else the runner or the job raises.
        """
        return self._run(session, job, args, _digest(job, args))

    # internals ------------------------------------------------------------
    def _run(self, session: str, job: Job, args: tuple[Any, ...], digest: str) -> Any:
        key = _job_key(job, args)
        verdict = self._judge(args[0]) if args and isinstance(args[0], str) else "unknown"
        ticket = self._admit(session, key, kind=_kind(job), digest=digest, verdict=verdict)
        # What the run says of the program's cost: "ran" (measured), "limit" (a time or memory limit: heavy),
        # "unmeasured" (a killed worker, a busy pool: nothing about the program).
        started, outcome = self._clock(), "ran"
        try:
            # A light job still running after DEMOTE_S was not light: it yields the CPU from then on.
            demote = (DEMOTE_S, NICE["heavy"]) if ticket.light else None
            result = self.runner.run(job, *args, cancel=ticket.stop, nice=NICE[ticket.lane], demote=demote)
        except RunnerError as e:
            if e.kind == "cancelled":
                raise JobCancelled("a newer run from the same page replaced this one while it ran, "
                                   "so it was stopped") from e
            if e.kind != "time":
                outcome = "limit" if e.kind == "memory" else "unmeasured"
                raise
            outcome = "limit"
            self._mark_suspect(session, key)
            raise relabel_time_out(e.message, ticket.peak, self._usage()) from e
        else:
            if isinstance(result, Failure) and result.kind == "time":  # the evaluator's own time limit
                outcome = "limit"
                self._mark_suspect(session, key)
                found = relabel_time_out(result.message, ticket.peak, self._usage())
                return Failure(found.message, kind=found.kind, line=result.line, col=result.col,
                               excerpt=result.excerpt)
            if isinstance(result, Failure) and result.kind == "render":
                return relabel_layout_time_out(result, self._usage())
            return result
        finally:
            if outcome != "unmeasured":
                self._measure(ticket, key, self._clock() - started, timed_out=outcome == "limit")
            with self._cond:
                self._running.remove(ticket)
                self._cond.notify_all()

    def _measure(self, ticket: _Ticket, key: Hashable, wall_s: float, *, timed_out: bool) -> None:
        """Keep what the job cost: CPU seconds where the runner measured them (a loaded machine
        stretches the wall time of every job alike), else wall seconds; a time or memory limit costs infinity."""
        usage = self._usage()
        spent = math.inf if timed_out else (usage.cpu_s if usage is not None and usage.cpu_s is not None
                                            else wall_s)
        targets = [("session", ticket.session)] + ([("program", key)] if key is not None else [])
        for target in targets:
            if not ticket.stop.is_set() or spent > self.light_s:
                self._costs.record(target, spent)
            elif target[0] == "session":
                self._costs.forget(target)  # stopped early by a newer run: says nothing of what it costs

    def _usage(self) -> JobUsage | None:
        """The CPU the last job of this thread got, when the runner measures it."""
        last = getattr(self.runner, "last_usage", None)
        return last() if callable(last) else None

    def _mark_suspect(self, session: str, key: Hashable) -> None:
        with self._cond:
            self._timed_out[session] = self._timed_out[key] = self._clock()

    def _admit(self, session: str, key: Hashable = None, *, kind: str = "", digest: str = "",
               verdict: Verdict = "unknown") -> _Ticket:
        with self._cond:
            suspect = self._is_suspect(session) or (key is not None and self._is_suspect(key))
            chosen = lane(suspect=suspect, verdict=verdict, light_s=self.light_s,
                          program_s=None if key is None else self._costs.get(("program", key)),
                          session_s=self._costs.get(("session", session)))
            ticket = _Ticket(session, next(self._seq), chosen, kind, digest)
            for older in self._waiting:
                if older.session == session:
                    older.cancelled = True  # the person asked for something newer
                    self._detached.pop((session, older.digest), None)  # not to be taken up again
            for older in self._running:
                if older.session == session and older.kind == kind:
                    older.stop.set()  # its worker is killed and the slot comes free
                    self._detached.pop((session, older.digest), None)
            self._waiting.append(ticket)
            self._cond.notify_all()
            deadline = self._clock() + (self.suspect_wait_s if ticket.suspect else self.max_wait_s)
            while True:
                if ticket.cancelled:
                    self._waiting.remove(ticket)
                    raise JobCancelled("a newer run from the same page replaced this one before it started")
                if self._next() is ticket:
                    break
                remaining = deadline - self._clock()
                if remaining <= 0:
                    self._waiting.remove(ticket)
                    self._cond.notify_all()
                    raise RunnerBusy(self._busy_message(ticket))
                self._cond.wait(min(remaining, 0.5))
            self._waiting.remove(ticket)
            self._running.append(ticket)
            for running in self._running:
                running.peak = max(running.peak, len(self._running))
            self._cond.notify_all()
            return ticket

    def _next(self) -> _Ticket | None:
        """The waiting ticket that may start now: non-suspects first, light jobs next, then
        the session with the fewest running jobs, then the oldest. Only light jobs take
        the last `reserved_slots` free workers."""
        if len(self._running) >= self.slots:
            return None
        heavy_room = len(self._running) < self.slots - self.reserved_slots
        per_session: dict[str, int] = {}
        for t in self._running:
            per_session[t.session] = per_session.get(t.session, 0) + 1
        suspects = sum(t.suspect for t in self._running)
        eligible = [
            t for t in self._waiting
            if not t.cancelled and per_session.get(t.session, 0) < self.per_session
            and (not t.suspect or suspects < self.suspect_slots) and (t.light or heavy_room)
        ]
        if not eligible:
            return None
        return min(eligible, key=lambda t: (t.suspect, not t.light, per_session.get(t.session, 0), t.seq))

    def _ran_light(self, session: str) -> bool:
        """The session's last job measured took at most `light_s`."""
        spent = self._costs.get(("session", session))
        return spent is not None and spent <= self.light_s

    def _is_suspect(self, who: Hashable) -> bool:
        now = self._clock()
        for key in [k for k, when in self._timed_out.items() if now - when > self.suspect_s]:
            del self._timed_out[key]
        return who in self._timed_out

    def _busy_message(self, ticket: _Ticket) -> str:
        wait = self.suspect_wait_s if ticket.suspect else self.max_wait_s
        kept_back = not ticket.light and self.reserved_slots > 0
        workers = f"{self.slots - self.reserved_slots} large-program" if kept_back else str(self.slots)
        text = (f"all {workers} workers are busy with other people's programs (waited {wait:g} s): "
                "press Run to try again in a moment")
        if kept_back and not ticket.suspect:
            kept = "one more is" if self.reserved_slots == 1 else f"{self.reserved_slots} more are"
            text += (f"; {kept} kept for small programs, and this one took long when it last ran, looks large "
                     "(tensors of over a million elements, or many operations), or could not be judged before "
                     "it ran")
        if ticket.suspect:
            text += ("; this program, or your last one, ran past the time limit in the last "
                     f"{self.suspect_s:g} s, so while the machine is busy it waits behind everyone "
                     "else's: make it smaller")
        return text


class SessionRunner:
    """One session's view of a `FairRunner`: what `service` calls `runner`.

    Args:
        fair: The shared runner.
        session: Whose jobs these are.
        on_wait: Called every `WAIT_CHECK_S` while a job runs. When it raises
            (the page: Streamlit's rerun exception, when the person pressed Run
            again), the exception is passed on and the job keeps running: the
            next run of the same job waits for it, a different job of the same
            kind stops it. Without it, `run` simply waits.
    """

    WAIT_CHECK_S = 0.1

    def __init__(self, fair: FairRunner, session: str, *, on_wait: Callable[[], None] | None = None) -> None:
        self.fair, self.session, self.on_wait = fair, session, on_wait

    @property
    def time_limit(self) -> float:
        """The runner's time limit per job, in seconds."""
        return self.fair.time_limit

    def run(self, job: Job, *args: Any) -> Any:
        """Run ``job(*args)`` as this session's job."""
        if self.on_wait is None:
            return self.fair.run(self.session, job, *args)
        future = self.fair.start(self.session, job, *args)
        while True:
            try:
                return future.result(timeout=self.WAIT_CHECK_S)
            except FutureTimeout:
                self.on_wait()


def _kind(job: Job) -> str:
    if isinstance(job, JobRef):
        return str(job)
    return f"{getattr(job, '__module__', '')}.{getattr(job, '__qualname__', repr(job))}"


_unique = itertools.count()


def _digest(job: Job, args: tuple[Any, ...]) -> str:
    """The same job again: its function and all its arguments."""
    try:
        return _kind(job) + ":" + hashlib.sha256(pickle.dumps(args)).hexdigest()
    except Exception:  # noqa: BLE001 - the runner explains unpicklable arguments; never taken up again
        return f"{_kind(job)}:unpicklable:{next(_unique)}"


def _job_key(job: Job, args: tuple[Any, ...]) -> Hashable:
    """The same job again: its function and first argument (the program, for the page's jobs)."""
    first = args[0] if args and isinstance(args[0], str) else None
    return None if first is None else ("job", _kind(job), hash(first))
