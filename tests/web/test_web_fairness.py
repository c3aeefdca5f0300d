"""Sharing the workers: one session's runaway programs do not starve the others."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from waiting import wait_until

from graphviz_app.runner import JobCancelled, JobTimeout, JobUsage, RunnerError
from graphviz_app.web import service
from graphviz_app.web.fairness import FairRunner
from graphviz_app.web.results import Failure


class FakePool:
    """Stands in for IsolatedRunner: runs the job in the calling thread."""

    def __init__(self, max_workers: int = 4, time_limit: float = 15.0) -> None:
        self.max_workers, self.time_limit = max_workers, time_limit

    def run(self, job: Callable[..., Any], *args: Any, cancel: threading.Event | None = None, nice: int = 0,
            demote: tuple[float, int] | None = None) -> Any:
        return job(*args)


class StoppablePool(FakePool):
    """Like FakePool, but a set cancel event stops the job, as the worker's kill does."""

    def __init__(self) -> None:
        super().__init__()
        self.started: list[str] = []

    def run(self, job: Callable[..., Any], *args: Any, cancel: threading.Event | None = None, nice: int = 0,
            demote: tuple[float, int] | None = None) -> Any:
        self.started.append(job.__name__)
        out: list[Any] = []
        worker = threading.Thread(target=lambda: out.append(job(*args)), daemon=True)
        worker.start()
        while worker.is_alive():
            worker.join(0.02)
            if cancel is not None and cancel.is_set():
                raise JobCancelled("the job was stopped before it finished, as asked")
        return out[0]


def runaway(release: threading.Event) -> str:
    """A program that runs until its time limit (here: until the test releases it)."""
    release.wait(10)
    raise JobTimeout("the job ran longer than its time limit of 15 s and was stopped")


def quick() -> str:
    return "<svg/>"


def blocked_until(release: threading.Event) -> str:
    release.wait(10)
    return "done"


def in_thread(fn: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []

    def target() -> None:
        try:
            out.append(fn())
        except RunnerError as e:
            out.append(e)

    t = threading.Thread(target=target, daemon=True)
    t.start()
    return t, out


def wait_running(fair: FairRunner, n: int) -> None:
    wait_until(lambda: len(fair._running) >= n, timeout=60, what=f"{n} job(s) running")  # noqa: SLF001 - probe
    assert len(fair._running) == n  # noqa: SLF001


def test_a_session_runs_one_job_at_a_time_and_others_are_not_held_up() -> None:
    fair = FairRunner(FakePool(), max_wait_s=0.3)
    release = threading.Event()
    first, _ = in_thread(lambda: fair.run("alice", blocked_until, release))
    wait_running(fair, 1)
    with pytest.raises(RunnerError, match="workers are busy") as caught:
        fair.run("alice", quick)  # her second job waits for her first, then gives up
    assert caught.value.kind == "busy"
    assert fair.run("bob", quick) == "<svg/>"  # bob is not held up by alice
    release.set()
    first.join(5)


def test_a_newer_job_from_the_same_session_replaces_its_waiting_older_one() -> None:
    fair = FairRunner(FakePool(), max_wait_s=5)
    release = threading.Event()
    running, _ = in_thread(lambda: fair.run("alice", blocked_until, release))
    wait_running(fair, 1)
    older, older_out = in_thread(lambda: fair.run("alice", quick))
    wait_until(lambda: fair._waiting, timeout=60, what="the older job waiting")  # noqa: SLF001 - test probe
    newer, newer_out = in_thread(lambda: fair.run("alice", quick))
    older.join(5)
    assert isinstance(older_out[0], RunnerError) and older_out[0].kind == "cancelled"
    assert "newer run from the same page replaced" in older_out[0].message
    release.set()
    newer.join(5)
    assert newer_out == ["<svg/>"]
    running.join(5)


def test_after_a_time_out_a_sessions_jobs_hold_at_most_half_the_workers() -> None:
    fair = FairRunner(FakePool(max_workers=4), max_wait_s=5, suspect_wait_s=0.3)
    release = threading.Event()
    release.set()
    for who in ("r1", "r2", "r3", "r4"):  # four runaway sessions: each times out once
        with pytest.raises(RunnerError, match="time limit"):
            fair.run(who, runaway, release)
    hold = threading.Event()
    threads = [in_thread(lambda who=who: fair.run(who, runaway, hold))[0] for who in ("r1", "r2", "r3", "r4")]
    # Two were told the pool is busy (after suspect_wait_s), two suspects run.
    wait_until(lambda: sum(t.is_alive() for t in threads) == 2, timeout=60, what="two suspects told 'busy'")
    assert len(fair._running) == 2  # noqa: SLF001 - test probe
    for _ in range(2):  # a newcomer finds a free worker at once, twice over
        assert fair.run("newcomer", quick) == "<svg/>"
    hold.set()
    for t in threads:
        t.join(5)


def test_a_suspects_busy_message_says_why_it_waits_behind_others() -> None:
    fair = FairRunner(FakePool(max_workers=2), suspect_wait_s=0.2, max_wait_s=0.2)
    release = threading.Event()
    release.set()
    with pytest.raises(RunnerError):
        fair.run("r1", runaway, release)
    hold = threading.Event()
    others = [in_thread(lambda who=who: fair.run(who, blocked_until, hold))[0] for who in ("a", "b")]
    wait_running(fair, 2)
    with pytest.raises(RunnerError, match="your last one, ran past the time limit in the last 60 s.*make it smaller"):
        fair.run("r1", quick)
    hold.set()
    for t in others:
        t.join(5)


class MeasuredPool(FakePool):
    """Like FakePool, with the CPU share its last job got, as IsolatedRunner measures it."""

    def __init__(self, usage: JobUsage) -> None:
        super().__init__()
        self.usage = usage

    def last_usage(self) -> JobUsage:
        return self.usage


def test_a_time_out_with_a_cpu_of_its_own_is_not_worth_a_retry_but_one_starved_of_cpu_is() -> None:
    release = threading.Event()
    release.set()
    alone = service._call(FairRunner(MeasuredPool(JobUsage(15.0, 14.6))).for_session("a"), runaway, release)  # noqa: SLF001
    assert isinstance(alone, Failure) and alone.kind == "overtime" and not alone.transient
    assert "It had a CPU to itself (97% of one, measured over its 15.0 s)" in alone.message
    assert "a retry will not help" in alone.message
    # At a load of 8 to 26 a worker gets a fraction of a CPU, whatever ran on the page beside it.
    starved = service._call(FairRunner(MeasuredPool(JobUsage(15.0, 2.0))).for_session("a"), runaway, release)  # noqa: SLF001
    assert isinstance(starved, Failure) and starved.kind == "time" and starved.transient
    assert "The machine was busy: it got 13% of a CPU over its 15.0 s (measured)" in starved.message
    assert "may pass at a quieter moment" in starved.message


def test_without_a_measurement_the_page_judges_by_its_own_jobs_and_says_so() -> None:
    fair = FairRunner(FakePool())
    release = threading.Event()
    release.set()
    alone = service._call(fair.for_session("a"), runaway, release)  # noqa: SLF001
    assert isinstance(alone, Failure) and alone.kind == "overtime" and "not measured here" in alone.message
    hold = threading.Event()
    other, _ = in_thread(lambda: fair.run("b", blocked_until, hold))
    wait_running(fair, 1)
    beside = service._call(fair.for_session("a"), runaway, release)  # noqa: SLF001
    assert isinstance(beside, Failure) and beside.kind == "time" and beside.transient
    assert "1 other program ran beside it, so it may pass at a quieter moment" in beside.message
    hold.set()
    other.join(5)


def evaluator_time_out() -> Failure:
    return Failure("the program ran longer than 10 s (Limits.max_seconds)", kind="time", line=3)


def test_the_evaluators_own_time_out_also_makes_a_suspect_and_is_relabelled() -> None:
    fair = FairRunner(FakePool())
    found = fair.run("a", evaluator_time_out)
    assert found.kind == "overtime" and found.line == 3 and "a retry will not help" in found.message
    assert fair._is_suspect("a") and not fair._is_suspect("b")  # noqa: SLF001


def runaway_program(program: str, release: threading.Event) -> str:
    return runaway(release)


def test_a_program_that_timed_out_is_a_suspect_for_every_session_that_sends_it() -> None:
    from graphviz_app.web.fairness import _job_key

    fair = FairRunner(FakePool())
    release = threading.Event()
    release.set()
    program = "a = torch.randn(3000, 3000)\ntorch.cdist(a, a, p=1).sum()"
    with pytest.raises(RunnerError, match="time limit"):
        fair.run("first visitor", runaway_program, program, release)
    same, other = _job_key(runaway_program, (program,)), _job_key(runaway_program, ("x = 1",))
    assert fair._admit("new tab", same).suspect  # noqa: SLF001 - a new tab, the same runaway link
    fair._running.clear()  # noqa: SLF001 - the probe above took a slot
    assert not fair._admit("new tab", other).suspect  # noqa: SLF001


def test_a_sessions_runaway_with_new_text_each_time_is_still_a_suspect() -> None:
    from graphviz_app.web.fairness import _job_key

    fair = FairRunner(FakePool())
    release = threading.Event()
    release.set()
    runaway_text = "a = torch.randn(3000, 3000)\ntorch.cdist(a, a, p=1).sum()  # try {}"
    with pytest.raises(RunnerError, match="time limit"):
        fair.run("red team", runaway_program, runaway_text.format(1), release)
    changed = _job_key(runaway_program, (runaway_text.format(2),))  # a new comment: a text never seen
    assert fair._admit("red team", changed).suspect  # noqa: SLF001 - the session, not the text, timed out
    fair._running.clear()  # noqa: SLF001 - the probe above took a slot
    assert not fair._admit("another page", changed).suspect  # noqa: SLF001


def slow_program(release: threading.Event, name: str) -> str:
    release.wait(10)
    return name


def test_a_newer_job_of_the_same_kind_stops_the_sessions_running_one() -> None:
    fair = FairRunner(StoppablePool(), max_wait_s=5)
    never = threading.Event()
    older, older_out = in_thread(lambda: fair.run("alice", slow_program, never, "old"))
    wait_running(fair, 1)
    release = threading.Event()
    release.set()
    # Not stopped, the old job would hold alice's one slot for 10 s, and the new one would
    # be told "busy" after max_wait_s (5 s).
    assert fair.run("alice", slow_program, release, "new") == "new"
    older.join(5)
    assert isinstance(older_out[0], RunnerError) and older_out[0].kind == "cancelled"
    assert "replaced this one while it ran" in older_out[0].message


def test_a_job_of_another_kind_or_session_leaves_the_running_one_alone() -> None:
    fair = FairRunner(StoppablePool(), max_wait_s=0.3)
    release, open_gate = threading.Event(), threading.Event()
    open_gate.set()
    older, older_out = in_thread(lambda: fair.run("alice", slow_program, release, "old"))
    wait_running(fair, 1)
    assert fair.run("bob", slow_program, open_gate, "bob's") == "bob's"
    with pytest.raises(RunnerError, match="workers are busy"):
        fair.run("alice", quick)  # another kind: it waits its turn instead
    release.set()
    older.join(5)
    assert older_out == ["old"]


GATES: dict[str, threading.Event] = {}


def gated(name: str) -> str:
    """A job that runs until the test opens its gate (picklable arguments, as the page's)."""
    GATES.setdefault(name, threading.Event()).wait(10)
    return name


class Rerun(BaseException):
    """Stands in for Streamlit's RerunException, raised where the page checks for a newer run."""


def interrupting() -> Callable[[], None]:
    def on_wait() -> None:
        raise Rerun

    return on_wait


def test_an_interrupted_wait_leaves_the_job_running_and_the_next_wait_takes_it_up() -> None:
    pool = StoppablePool()
    fair = FairRunner(pool, max_wait_s=5)
    with pytest.raises(Rerun):
        fair.for_session("alice", on_wait=interrupting()).run(gated, "same-1")
    threading.Timer(0.3, lambda: GATES["same-1"].set()).start()
    again = fair.for_session("alice", on_wait=lambda: None).run(gated, "same-1")
    assert again == "same-1"
    assert pool.started == ["gated"]  # taken up, not started over
    assert not fair._detached  # noqa: SLF001 - nothing left behind


def test_a_new_program_after_an_interrupted_wait_stops_the_old_job() -> None:
    pool = StoppablePool()
    fair = FairRunner(pool, max_wait_s=5)
    with pytest.raises(Rerun):
        fair.for_session("alice", on_wait=interrupting()).run(gated, "old-2")
    GATES.setdefault("new-2", threading.Event()).set()
    # old-2's gate never opens: not stopped, it would hold the slot for 10 s, and new-2
    # would be told "busy" after max_wait_s (5 s).
    assert fair.for_session("alice", on_wait=lambda: None).run(gated, "new-2") == "new-2"
    assert pool.started == ["gated", "gated"]
    wait_until(lambda: not fair._detached, timeout=60, what="the old job's thread ending")  # noqa: SLF001


def test_without_a_wait_check_a_session_runner_waits_in_the_calling_thread() -> None:
    fair = FairRunner(FakePool())
    assert fair.for_session("alice").run(quick) == "<svg/>"
    assert not fair._detached  # noqa: SLF001


def test_a_stopped_job_is_started_anew_when_asked_for_again_not_taken_up() -> None:
    pool = StoppablePool()
    fair = FairRunner(pool, max_wait_s=5)
    with pytest.raises(Rerun):
        fair.for_session("alice", on_wait=interrupting()).run(gated, "a-3")
    with pytest.raises(Rerun):
        fair.for_session("alice", on_wait=interrupting()).run(gated, "b-3")  # stops a-3
    wait_until(lambda: len(fair._detached) <= 1, timeout=60, what="a-3 let go")  # noqa: SLF001 - test probe
    GATES.setdefault("a-3", threading.Event()).set()
    assert fair.for_session("alice", on_wait=lambda: None).run(gated, "a-3") == "a-3"
    assert pool.started == ["gated", "gated", "gated"]  # a-3, b-3, and a-3 again


HEAVY = "a = torch.randn(400, 20000)\nfor i in range(1000):\n    b = torch.cdist(a, a, p=1).sum()\nb"
LIGHT = "x = torch.arange(3., requires_grad=True)\n((x+2)**2+3).mean()"
UNKNOWN = "x = torch.arange(3.)\ntorch.randn(x.shape[0] * 10**7).sum()"  # a size known only when it runs


def program_until(program: str, release: threading.Event) -> str:
    """A program's job that holds its worker until the test releases it."""
    release.wait(10)
    return program


def three_heavy_running(fair: FairRunner, release: threading.Event) -> list[threading.Thread]:
    threads = [in_thread(lambda who=who: fair.run(who, program_until, HEAVY, release))[0] for who in ("r1", "r2", "r3")]
    wait_running(fair, 3)
    return threads


def test_the_last_free_worker_is_kept_for_a_light_program_while_a_heavy_one_waits() -> None:
    fair = FairRunner(FakePool(max_workers=4), max_wait_s=0.3)
    assert fair.reserved_slots == 1
    release = threading.Event()
    threads = three_heavy_running(fair, release)  # no session has a history yet: none is a suspect
    kept = "all 3 large-program workers are busy.*one more is kept for small programs"
    with pytest.raises(RunnerError, match=kept) as caught:
        fair.run("r4", program_until, HEAVY, release)  # a fourth runaway never takes the last worker
    assert caught.value.kind == "busy"
    done = threading.Event()
    done.set()
    assert fair.run("visitor", program_until, LIGHT, done) == LIGHT  # a small program starts at once
    release.set()
    for t in threads:
        t.join(5)


def test_a_program_the_text_cannot_size_takes_the_last_worker_only_after_a_quick_job() -> None:
    fair = FairRunner(FakePool(max_workers=4), max_wait_s=0.3)
    release, done = threading.Event(), threading.Event()
    done.set()
    threads = three_heavy_running(fair, release)
    with pytest.raises(RunnerError, match="could not be judged"):
        fair.run("new page", program_until, UNKNOWN, done)  # no history: waits for the other workers
    with pytest.raises(RunnerError, match="busy"):
        fair.run("regular", quick)  # not a program, and no history: waits too...
    release.set()
    for t in threads:
        t.join(5)
    assert fair.run("regular", quick) == "<svg/>"  # ...until a job of its page ran quickly
    release = threading.Event()
    threads = three_heavy_running(fair, release)
    assert fair.run("regular", program_until, UNKNOWN, done) == UNKNOWN  # ...and now its last job was quick
    release.set()
    for t in threads:
        t.join(5)


def test_a_light_looking_program_from_a_suspect_does_not_take_the_last_worker() -> None:
    fair = FairRunner(FakePool(max_workers=4), max_wait_s=0.3, suspect_wait_s=0.3)
    gone = threading.Event()
    gone.set()
    with pytest.raises(RunnerError, match="time limit"):
        fair.run("red team", runaway_program, LIGHT, gone)  # small text, ran to the time limit
    release = threading.Event()
    threads = three_heavy_running(fair, release)
    with pytest.raises(RunnerError, match="busy"):
        fair.run("red team", program_until, LIGHT + "  # again", gone)
    release.set()
    for t in threads:
        t.join(5)


def test_with_two_workers_none_is_kept_back() -> None:
    fair = FairRunner(FakePool(max_workers=2), max_wait_s=5)
    release = threading.Event()
    first, _ = in_thread(lambda: fair.run("r1", program_until, HEAVY, release))
    wait_running(fair, 1)
    second, out = in_thread(lambda: fair.run("r2", program_until, HEAVY, release))
    wait_running(fair, 2)  # both workers run heavy programs: a quarter of two slots is none
    release.set()
    for t in (first, second):
        t.join(5)
    assert out == [HEAVY]


def test_a_job_stopped_by_a_newer_one_does_not_count_as_quick() -> None:
    fair = FairRunner(StoppablePool(), max_wait_s=5)
    hold = threading.Event()
    first, first_out = in_thread(lambda: fair.run("red team", program_until, UNKNOWN, hold))
    wait_running(fair, 1)
    second, _ = in_thread(lambda: fair.run("red team", program_until, UNKNOWN + "  # again", hold))
    first.join(5)  # stopped at once by the newer program: it ran briefly, but says nothing of its cost
    assert isinstance(first_out[0], RunnerError) and first_out[0].kind == "cancelled"
    assert not fair._ran_light("red team")  # noqa: SLF001 - probe: its next unknown program waits for large workers
    hold.set()
    second.join(5)
    assert fair._ran_light("red team")  # noqa: SLF001 - the second ran to its end quickly
