"""A job run with `nice` runs at a lower CPU priority, and the next job of that worker does not inherit it."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest

from graphviz_app.runner import IsolatedRunner
from graphviz_app.runner.priority import set_nice, supported

pytestmark = pytest.mark.skipif(not (hasattr(os, "fork") and supported()),
                                reason="CPU priorities are POSIX's (os.setpriority)")


def niceness() -> tuple[int, int]:
    """The worker's nice value and pid."""
    return os.getpriority(os.PRIO_PROCESS, 0), os.getpid()


@pytest.fixture(scope="module")
def runner() -> Iterator[IsolatedRunner]:
    with IsolatedRunner(workers=1, max_workers=1, time_limit=60, memory_limit=None) as r:
        r.warm_up()
        yield r


def test_a_niced_job_runs_lower_and_the_next_job_runs_at_the_normal_priority(runner: IsolatedRunner) -> None:
    base = os.getpriority(os.PRIO_PROCESS, 0)
    normal, _ = runner.run(niceness)
    lowered, _ = runner.run(niceness, nice=10)
    after, _ = runner.run(niceness)
    assert normal == base
    assert lowered == min(base + 10, 19)
    assert after == base  # raised back (with the privilege to) or a fresh worker (without)


def test_the_pool_keeps_working_when_the_worker_could_not_be_raised_back(
    runner: IsolatedRunner, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from graphviz_app.runner import pool

    _, first = runner.run(niceness, nice=5)

    def refuse_raising(pid: int, nice: int) -> bool:  # as without CAP_SYS_NICE: lowering works, raising does not
        return set_nice(pid, nice) if nice > 0 else False

    monkeypatch.setattr(pool, "set_nice", refuse_raising)
    _, niced = runner.run(niceness, nice=5)
    value, fresh = runner.run(niceness)
    assert value == os.getpriority(os.PRIO_PROCESS, 0)
    assert fresh != niced  # the lowered worker was retired, not handed on


def slow_niceness(seconds: float) -> tuple[int, int]:
    """The worker's nice value after running `seconds`."""
    time.sleep(seconds)
    return niceness()


def test_a_job_that_outlasts_its_demotion_time_is_lowered_and_a_quick_one_is_not(runner: IsolatedRunner) -> None:
    base = os.getpriority(os.PRIO_PROCESS, 0)
    quick, _ = runner.run(niceness, demote=(30.0, 7))
    slow, _ = runner.run(slow_niceness, 1.5, demote=(0.2, 7))
    after, _ = runner.run(niceness)
    assert (quick, slow, after) == (base, min(base + 7, 19), base)


def test_set_nice_of_a_process_that_is_gone_says_so() -> None:
    assert set_nice(2**22 + 12345, 5) is False
