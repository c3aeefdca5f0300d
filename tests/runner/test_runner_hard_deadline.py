"""One long operation in a worker is stopped at the program's time limit, not when it ends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from waiting import wait_until

from graphviz_app.expr import Limits
from graphviz_app.expr.jobs import evaluate_job
from graphviz_app.expr.rehearsal import PRELOAD
from graphviz_app.runner import HARD_GRACE_S, IsolatedRunner, RunnerError
from graphviz_app.runner.deadline import hard_deadline
from graphviz_app.runner.usage import CpuClock

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the worker tests use POSIX processes")

# One cdist at p=3 over 9·10^9 distance terms: about 80 s on this project's 2-core machine and still
# many seconds on a fast one (a 4000x4000 matmul, tried first, ends in 2 s with a good BLAS and never
# reaches the deadline). These limits let it past the costs (as if nobody had costed it) and stop the
# program at 1 s.
LONG_OP = "a = torch.randn(3000, 1000)\ntorch.cdist(a, a, p=3).sum()"
LIMITS = Limits(max_seconds=1.0, max_multiply_adds=10**12, max_tensor_elements=2 * 10**7, max_total_bytes=10**9)


@pytest.fixture(scope="module")
def runner() -> Iterator[IsolatedRunner]:
    with IsolatedRunner(workers=1, max_workers=1, time_limit=300.0, memory_limit=None, preload=PRELOAD) as r:
        r.warm_up()
        yield r


@pytest.mark.slow
def test_a_single_long_op_ends_the_worker_at_the_hard_deadline(runner: IsolatedRunner) -> None:
    start = time.monotonic()
    with pytest.raises(RunnerError, match="stopped inside one operation") as info:
        runner.run(evaluate_job, LONG_OP, LIMITS)
    elapsed = time.monotonic() - start
    assert info.value.kind == "time"
    assert "ran longer than" in str(info.value) and "deadline)" not in str(info.value)  # no module name
    # The limit is 1 s + the 2 s grace; the margin is for a busy machine, far below the op's own time.
    assert elapsed < LIMITS.max_seconds + HARD_GRACE_S + 20
    # The worker is gone, but the CPU it got was sampled while it ran: the page can say busy or not.
    usage = runner.last_usage()
    assert usage is not None and usage.cpu_s is not None and usage.cpu_s > 0, usage
    assert runner.run(evaluate_job, "torch.ones(2).sum()")["output"][0]["values"] == [2.0]  # a fresh worker


def test_the_cpu_clock_keeps_its_last_sample_of_a_process_that_is_gone() -> None:
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        clock = CpuClock(burner.pid)
        wait_until(lambda: (clock.sample(), clock.stop().cpu_s or 0.0)[1] > 0.05, timeout=60,
                   what="the burner to use some CPU")
        clock.sample()  # kept now: at least what the wait read (stop() reads afresh; CPU time only grows)
    finally:
        burner.kill()
        burner.wait()  # reaped: /proc no longer has it
    usage = clock.stop()
    assert usage.cpu_s is not None and usage.cpu_s > 0.05 and usage.share is not None, usage


def test_outside_a_worker_the_deadline_never_arms_a_timer_that_would_end_the_caller() -> None:
    with hard_deadline(0.001):
        assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
