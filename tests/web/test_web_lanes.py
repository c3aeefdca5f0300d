"""The light lane by measurement: what a program and its page cost before decides, the text only when unmeasured.

Deterministic: the pool is a fake that runs the job in the calling thread and says how much CPU it
"measured"; the clock is a counter. No timing is asserted.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from typing import Any

import pytest
from waiting import wait_until

from graphviz_app.runner import JobOutOfMemory, JobTimeout, JobUsage, RunnerError, WorkerCrashed
from graphviz_app.web.fairness import FairRunner
from graphviz_app.web.lanes import DEMOTE_S, NICE, CostBook, lane

LIGHT_S = 2.0

LANES = [
    # suspect, text verdict, this program measured, the page's last job measured -> lane
    (True, "light", 0.1, 0.1, "suspect"),  # a time-out lately outweighs everything
    (False, "light", 14.0, None, "heavy"),  # light-looking text, but it ran long last time
    (False, "light", math.inf, 0.1, "heavy"),  # it ran to the time limit in another page
    (False, "heavy", 0.3, None, "light"),  # the judge over-counted: it ran quickly
    (False, "unknown", 0.3, None, "light"),  # the text says nothing; the measurement does
    (False, "unknown", 5.0, 0.1, "heavy"),
    (False, "light", None, 9.0, "heavy"),  # a new program from a page whose last job ran long
    (False, "light", None, None, "light"),  # never measured: the text decides
    (False, "light", None, 0.5, "light"),
    (False, "heavy", None, 0.5, "heavy"),
    (False, "unknown", None, 0.5, "light"),  # the page's last job was quick
    (False, "unknown", None, None, "heavy"),  # nothing known at all
    (False, "light", 2.0, None, "light"),  # light_s itself is light
]


@pytest.mark.parametrize(("suspect", "verdict", "program_s", "session_s", "expected"), LANES)
def test_the_lane_is_decided_by_measurement_first(suspect: bool, verdict: str, program_s: float | None,
                                                  session_s: float | None, expected: str) -> None:
    assert lane(suspect=suspect, verdict=verdict, program_s=program_s, session_s=session_s,  # type: ignore[arg-type]
                light_s=LIGHT_S) == expected


def test_heavier_lanes_run_at_lower_cpu_priority() -> None:
    assert NICE["light"] == 0 < NICE["heavy"] < NICE["suspect"] <= 19


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_cost_book_forgets_old_and_least_recent_entries() -> None:
    clock = Clock()
    book = CostBook(size=2, keep_s=60.0, clock=clock)
    book.record("a", 1.0)
    book.record("b", 2.0)
    assert book.get("a") == 1.0  # read, but not made recent: only a record does that
    book.record("c", 3.0)
    assert (book.get("a"), book.get("b"), book.get("c")) == (None, 2.0, 3.0)
    clock.now = 61.0
    assert book.get("b") is None
    book.record("d", 4.0)
    book.forget("d")
    assert book.get("d") is None


class MeasuringPool:
    """Runs the job here; says the CPU it took (the `cpu` argument of the job), records the nice asked for."""

    max_workers, time_limit = 4, 15.0

    def __init__(self) -> None:
        self.nice: list[tuple[str, int]] = []
        self.demote: list[tuple[float, int] | None] = []
        self._local = threading.local()

    def run(self, job: Callable[..., Any], *args: Any, cancel: threading.Event | None = None, nice: int = 0,
            demote: tuple[float, int] | None = None) -> Any:
        self.nice.append((args[0] if args else job.__name__, nice))
        self.demote.append(demote)
        self._local.usage = None
        result = job(*args)
        self._local.usage = JobUsage(wall_s=result[1], cpu_s=result[1])
        return result[0]

    def last_usage(self) -> JobUsage | None:
        return getattr(self._local, "usage", None)


def costs(program: str, cpu_s: float) -> tuple[str, float]:
    """A program's job that "took" `cpu_s` CPU seconds."""
    return program, cpu_s


def held(program: str, release: threading.Event) -> tuple[str, float]:
    release.wait(10)
    return program, 20.0


LIGHT_TEXT = "x = torch.arange(3., requires_grad=True)\n((x+2)**2+3).mean()"
HEAVY_TEXT = "a = torch.randn(400, 20000)\nfor i in range(1000):\n    b = torch.cdist(a, a, p=1).sum()\nb"


def three_heavy(fair: FairRunner, release: threading.Event) -> list[threading.Thread]:
    threads = []
    for who in ("r1", "r2", "r3"):
        t = threading.Thread(target=lambda who=who: fair.run(who, held, f"{HEAVY_TEXT}  # {who}", release),
                             daemon=True)
        t.start()
        threads.append(t)
    wait_until(lambda: len(fair._running) == 3, timeout=60, what="three heavy jobs running")  # noqa: SLF001
    return threads


def test_a_light_looking_program_that_ran_long_before_is_heavy_next_time() -> None:
    pool = MeasuringPool()
    fair = FairRunner(pool, max_wait_s=0.3)  # type: ignore[arg-type]
    assert fair.run("page a", costs, LIGHT_TEXT, 9.0) == LIGHT_TEXT  # small text, 9 s of CPU
    release = threading.Event()
    threads = three_heavy(fair, release)
    with pytest.raises(RunnerError, match="kept for small programs, and this one took long when it last ran"):
        fair.run("page b", costs, LIGHT_TEXT, 9.0)  # the same program from another page: not light
    assert fair.run("page c", costs, LIGHT_TEXT + " ", 0.01) == LIGHT_TEXT + " "  # a new light one still is
    release.set()
    for t in threads:
        t.join(5)
    assert (LIGHT_TEXT + " ", NICE["light"]) in pool.nice


def test_a_program_measured_quick_is_light_whatever_its_text_says() -> None:
    pool = MeasuringPool()
    fair = FairRunner(pool, max_wait_s=0.3)  # type: ignore[arg-type]
    release = threading.Event()
    threads = three_heavy(fair, release)
    with pytest.raises(RunnerError, match="busy"):
        fair.run("page a", costs, HEAVY_TEXT, 0.2)  # never measured, heavy text: waits for the heavy workers
    release.set()
    for t in threads:
        t.join(5)
    assert fair.run("page a", costs, HEAVY_TEXT, 0.2) == HEAVY_TEXT  # ran, 0.2 s of CPU
    release = threading.Event()
    threads = three_heavy(fair, release)
    assert fair.run("page b", costs, HEAVY_TEXT, 0.2) == HEAVY_TEXT  # now light: the last worker takes it
    release.set()
    for t in threads:
        t.join(5)


def test_a_page_whose_last_job_ran_long_sends_its_next_new_program_down_the_heavy_lane() -> None:
    pool = MeasuringPool()
    fair = FairRunner(pool)  # type: ignore[arg-type]
    fair.run("page a", costs, "y = 1  # one", 30.0)
    fair.run("page a", costs, LIGHT_TEXT, 0.01)  # light text, but the page's last job took 30 s
    fair.run("page a", costs, LIGHT_TEXT + "  # again", 0.01)  # ...and now its last one was quick
    assert [n for _, n in pool.nice] == [NICE["heavy"], NICE["heavy"], NICE["light"]]


def timed_out(program: str) -> tuple[str, float]:
    raise JobTimeout("the job ran longer than its time limit of 15 s and was stopped")


def test_each_lane_runs_at_its_cpu_priority() -> None:
    pool = MeasuringPool()
    fair = FairRunner(pool)  # type: ignore[arg-type]
    fair.run("visitor", costs, LIGHT_TEXT, 0.01)
    fair.run("red team", costs, HEAVY_TEXT, 0.01)
    with pytest.raises(RunnerError, match="time limit"):
        fair.run("red team", timed_out, HEAVY_TEXT + " # 2")
    fair.run("red team", costs, LIGHT_TEXT + " # 3", 0.01)  # a suspect now, whatever its text
    assert [n for _, n in pool.nice] == [NICE["light"], NICE["heavy"], NICE["heavy"], NICE["suspect"]]
    # A light job that outlasts DEMOTE_S yields the CPU from then on; the others already run lower.
    assert pool.demote == [(DEMOTE_S, NICE["heavy"]), None, None, None]


def behaves(program: str, outcome: float | str) -> tuple[str, float]:
    """The page's one job function: takes `outcome` CPU seconds, or runs out of memory, or loses its worker."""
    if outcome == "memory":
        raise JobOutOfMemory("the job ran out of its memory limit (2.0 GiB): use smaller tensors")
    if outcome == "killed":
        raise WorkerCrashed("the worker process was killed by SIGKILL", exit_code=-9)
    assert isinstance(outcome, float)
    return program, outcome


def test_a_program_that_ran_out_of_memory_is_heavy_next_time_and_a_killed_worker_says_nothing() -> None:
    pool = MeasuringPool()
    fair = FairRunner(pool)  # type: ignore[arg-type]
    bomb, killed = LIGHT_TEXT + "  # bomb", LIGHT_TEXT + "  # killed"
    with pytest.raises(RunnerError, match="memory limit"):
        fair.run("bomber", behaves, bomb, "memory")
    fair.run("visitor", behaves, bomb, 0.01)  # the same program from another page: heavy lane
    fair.run("visitor", behaves, LIGHT_TEXT, 0.01)  # quick: the visitor's page is light again
    with pytest.raises(RunnerError, match="killed by SIGKILL"):
        fair.run("visitor", behaves, killed, "killed")  # an operator killed the worker
    fair.run("visitor", behaves, killed, 0.01)  # neither the program nor the page was marked
    assert [n for _, n in pool.nice] == [NICE["light"], NICE["heavy"], NICE["light"], NICE["light"], NICE["light"]]
