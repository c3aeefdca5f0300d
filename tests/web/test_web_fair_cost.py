"""Fair under load: sessions are recognised by the worker-seconds they held, not by their programs' text."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from graphviz_app.expr import ExprError
from graphviz_app.web.fairness import FairRunner
from graphviz_app.web.session_costs import SessionCosts


class Pool:
    """Runs the job on its own thread; a set cancel event stops it, as the worker's kill does."""

    def __init__(self, max_workers: int = 2) -> None:
        self.max_workers, self.time_limit = max_workers, 15.0

    def run(self, job: Callable[..., Any], *args: Any, cancel: threading.Event | None = None) -> Any:
        out: list[Any] = []
        worker = threading.Thread(target=lambda: out.append(job(*args)), daemon=True)
        worker.start()
        while worker.is_alive():
            worker.join(0.02)
            if cancel is not None and cancel.is_set():
                raise ExprError("the job was stopped before it finished, as asked", kind="cancelled")
        return out[0]


def runaway(program: str, release: threading.Event) -> str:
    """A program that runs until the test releases it (its text is only a label)."""
    release.wait(30)
    return program


def small(program: str) -> str:
    return program


def in_thread(fn: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []

    def target() -> None:
        try:
            out.append(fn())
        except ExprError as e:
            out.append(e)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, out


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def test_a_session_that_held_workers_is_a_suspect_whatever_text_it_sends_next() -> None:
    now = [0.0]
    fair = FairRunner(Pool(), heavy_s=5.0, clock=lambda: now[0])
    release = threading.Event()
    release.set()
    fair.run("runaways", runaway, "# attempt 1\nloop()", release)  # returns at once; the clock says 0 s
    assert not fair._suspect(fair._admit("runaways", kind="probe"))  # noqa: SLF001 - 0 s held: not heavy
    fair._running.clear()  # noqa: SLF001 - the probe took a slot
    fair._costs.add("runaways", 6.0, now=1.0)  # noqa: SLF001 - a runaway held a worker 6 s
    now[0] = 2.0
    for text in ("# attempt 2\nloop()", "# attempt 3, another comment\nloop()"):
        ticket = fair._admit("runaways", ("job", "x", hash(text)), kind=text)  # noqa: SLF001
        assert fair._suspect(ticket), text  # noqa: SLF001 - by cost, not by text
        fair._running.clear()  # noqa: SLF001
    assert not fair._suspect(fair._admit("newcomer", kind="probe"))  # noqa: SLF001
    fair._running.clear()  # noqa: SLF001
    now[0] = 70.0  # the window has passed: the session is light again
    assert not fair._suspect(fair._admit("runaways", kind="probe"))  # noqa: SLF001


def test_a_heavy_sessions_job_waits_behind_a_light_one() -> None:
    fair = FairRunner(Pool(max_workers=1), max_wait_s=10)
    fair._costs.add("heavy", 15.0, now=time.monotonic())  # noqa: SLF001 - a job held a worker 15 s
    hold = threading.Event()
    first, _ = in_thread(lambda: fair.run("holder", runaway, "hold", hold))
    wait_until(lambda: len(fair._running) == 1, "the holder running")  # noqa: SLF001
    heavy, heavy_out = in_thread(lambda: fair.run("heavy", small, "heavy"))
    wait_until(lambda: len(fair._waiting) == 1, "the heavy session waiting")  # noqa: SLF001
    light, light_out = in_thread(lambda: fair.run("light", small, "light"))
    wait_until(lambda: len(fair._waiting) == 2, "both waiting")  # noqa: SLF001
    hold.set()
    light.join(20)
    assert light_out == ["light"]
    heavy.join(20)
    assert heavy_out == ["heavy"] or (isinstance(heavy_out[0], ExprError) and heavy_out[0].kind == "busy")
    first.join(20)


def test_a_light_sessions_job_gets_the_slot_of_the_heaviest_running_job() -> None:
    fair = FairRunner(Pool(max_workers=2), max_wait_s=20, preempt_after_s=0.3, preempt_min_run_s=0.5, heavy_s=0.4)
    hold = threading.Event()
    runaways = [in_thread(lambda who=who: fair.run(who, runaway, f"# {who}\nloop()", hold)) for who in ("r1", "r2")]
    wait_until(lambda: len(fair._running) == 2, "two runaways running")  # noqa: SLF001
    fair._costs.add("r2", 30.0, now=time.monotonic())  # noqa: SLF001 - r2 held workers longest lately
    start = time.monotonic()
    assert fair.run("valid", small, "x.sum()") == "x.sum()"
    waited = time.monotonic() - start
    assert waited < 10  # not the runaways' time: preempt_after_s + preempt_min_run_s and a margin
    (t1, out1), (t2, out2) = runaways
    t2.join(20)
    assert isinstance(out2[0], ExprError) and out2[0].kind == "busy"
    assert "was stopped to let other people's programs run" in out2[0].message
    assert t1.is_alive()  # the lighter runaway kept its worker
    hold.set()
    t1.join(20)
    assert out1 == ["# r1\nloop()"]


def test_two_light_sessions_never_stop_each_others_jobs() -> None:
    fair = FairRunner(Pool(max_workers=1), max_wait_s=1.5, preempt_after_s=0.2, preempt_min_run_s=0.2,
                      heavy_s=100.0)
    hold = threading.Event()
    first, out = in_thread(lambda: fair.run("a", runaway, "a long but honest program", hold))
    wait_until(lambda: len(fair._running) == 1, "a's job running")  # noqa: SLF001
    with pytest.raises(ExprError, match="workers are busy") as info:
        fair.run("b", small, "b")  # waits its 1.5 s; a's job, barely heavier, is not stopped for it
    assert info.value.kind == "busy"
    assert first.is_alive()
    hold.set()
    first.join(20)
    assert out == ["a long but honest program"]


@pytest.mark.parametrize(("spent", "heavy"), [([], False), ([4.9], False), ([0.5] * 60, False), ([0.3, 15.0], True)])
def test_a_session_is_heavy_when_one_job_held_a_worker_past_heavy_s(spent: list[float], heavy: bool) -> None:
    # Many small programs (one a second) are not a runaway; one 15 s job is.
    costs = SessionCosts(window_s=60.0, heavy_s=5.0)
    for seconds in spent:
        costs.add("s", seconds, now=10.0)
    assert costs.heavy("s", now=20.0) is heavy
    assert costs.heavy("s", now=71.0) is False  # the window forgets
