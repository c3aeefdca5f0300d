"""Time-outs say whether the machine was busy, from the CPU the job got; load-caused ones are never cached."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from graphviz_app.expr import Limits
from graphviz_app.expr.jobs import evaluate_job
from graphviz_app.expr.rehearsal import PRELOAD
from graphviz_app.runner import IsolatedRunner, JobUsage
from graphviz_app.web import service
from graphviz_app.web.cache import ResultCache, cacheable
from graphviz_app.web.fairness import FairRunner
from graphviz_app.web.results import Failure

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="the CPU a job got is read from /proc")

RUNAWAY = "a = torch.randn(300, 300)\nfor i in range(1000):\n    b = (a @ a @ a @ a).sum()\nb"
NO_TIME_LIMIT = Limits(max_seconds=1000.0, max_total_bytes=10**10)


@pytest.fixture
def runner() -> Iterator[IsolatedRunner]:
    with IsolatedRunner(workers=1, max_workers=1, time_limit=4.0, memory_limit=None, preload=PRELOAD) as r:
        r.warm_up()
        yield r


@pytest.fixture
def cpu_hogs() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Busy loops, two per core: a job beside them gets a fraction of a CPU."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2 * (os.cpu_count() or 1))]
    try:
        yield hogs
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait(10)


def test_the_runner_measures_the_cpu_a_job_got(runner: IsolatedRunner) -> None:
    # Work of a few hundred ms of CPU: well above the clock's 10 ms ticks, however busy the machine.
    runner.run(evaluate_job, "a = torch.randn(300, 300)\nfor i in range(60):\n    a = (a @ a).tanh()\na.sum()")
    usage = runner.last_usage()
    assert usage is not None and usage.cpu_s is not None
    assert 0 < usage.cpu_s <= usage.wall_s * 2 + 0.2  # one torch thread: about one CPU at most (tick rounding)


@pytest.mark.slow
def test_a_time_out_under_a_cpu_hog_says_the_machine_was_busy_and_offers_a_retry(
    runner: IsolatedRunner, cpu_hogs: list[subprocess.Popen[bytes]],
) -> None:
    fair = FairRunner(runner)
    found = service._call(fair.for_session("a"), evaluate_job, RUNAWAY, NO_TIME_LIMIT)  # noqa: SLF001
    assert isinstance(found, Failure)
    assert found.kind == "time" and found.transient, found.message
    assert "The machine was busy: it got" in found.message and "may pass at a quieter moment" in found.message
    usage = runner.last_usage()
    assert usage is not None and usage.busy
    assert not ResultCache().put(("analysis", RUNAWAY), found)  # served to nobody later


BUSY_LAYOUT = ("laying out 1,000 nodes with dot took over 12.3 s; it got 2.1 s of CPU in that time: the machine "
               "was busy, so trying again when it is quieter may succeed; draw fewer nodes (max_nodes, depth), allow "
               "more time (timeout) or save .dot / .json instead")
BIG_LAYOUT = ("laying out 1,000 nodes with dot took over 12.3 s (12.1 s of CPU: the graph is too big for the time, "
              "not the machine too busy); draw fewer nodes (max_nodes, depth), allow more time (timeout) or save "
              ".dot / .json instead")


def layout_failure(message: str) -> Failure:
    return Failure(message, kind="render")


class MeasuredPool:
    """Runs the job here, and says how much CPU it got (as IsolatedRunner measures it)."""

    max_workers, time_limit = 4, 15.0

    def __init__(self, usage: JobUsage) -> None:
        self.usage = usage

    def run(self, job, *args, cancel=None, nice=0, demote=None):  # noqa: ANN001, ANN002, ANN201
        return job(*args)

    def last_usage(self) -> JobUsage:
        return self.usage


@pytest.mark.parametrize(
    ("message", "usage", "kind"),
    [
        (BUSY_LAYOUT, JobUsage(13.0, 2.5), "time"),  # the layout said so, and the job was starved
        (BUSY_LAYOUT, JobUsage(13.0, None), "time"),  # said by the layout alone
        (BIG_LAYOUT.replace(" (12.1 s of CPU: the graph is too big for the time, not the machine too busy)", ""),
         JobUsage(13.0, 1.0), "time"),  # measured by the runner alone
        (BIG_LAYOUT, JobUsage(13.0, 12.9), "render"),  # too big with a CPU of its own: the same next time
    ],
)
def test_a_layout_stopped_by_load_is_a_retry_and_never_cached(message: str, usage: JobUsage, kind: str) -> None:
    fair = FairRunner(MeasuredPool(usage))  # type: ignore[arg-type]
    found = fair.run("a", layout_failure, message)
    assert isinstance(found, Failure) and found.kind == kind, found
    cache = ResultCache()
    assert cache.put("key", found) == (kind == "render")
    assert cacheable(found) == (kind == "render")


def test_the_cache_refuses_a_busy_layout_whoever_hands_it_over() -> None:
    assert not cacheable(Failure(BUSY_LAYOUT, kind="render"))
    assert cacheable(Failure(BIG_LAYOUT, kind="render"))
