"""The isolated worker: results come back, runaway jobs are stopped, the server carries on."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator

import pytest
from expr_seed import SEED_PROGRAM, SEED_VALUE
from waiting import wait_until

from graphviz_app.expr import ExprError, Limits
from graphviz_app.expr.jobs import evaluate_job
from graphviz_app.expr.rehearsal import PRELOAD
from graphviz_app.runner import IsolatedRunner, RunnerError

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the worker tests use POSIX processes")


TIME_LIMIT_S = 20


def busy_workers(runner: IsolatedRunner) -> int:
    return runner._count - len(runner._idle)  # noqa: SLF001 - test probe


@pytest.fixture(scope="module")
def runner() -> Iterator[IsolatedRunner]:
    with IsolatedRunner(workers=2, max_workers=3, time_limit=TIME_LIMIT_S, memory_limit=512 * 1024**2,
                        preload=PRELOAD) as r:
        r.warm_up()
        yield r


def _seed_ok(runner: IsolatedRunner) -> bool:
    result = runner.run(evaluate_job, SEED_PROGRAM)
    return result["output"][0]["values"] == pytest.approx([SEED_VALUE])


def test_job_result_comes_back_as_plain_data(runner: IsolatedRunner) -> None:
    result = runner.run(evaluate_job, SEED_PROGRAM)
    assert result["output"] == [
        {"shape": [], "dtype": "float32", "device": "cpu", "requires_grad": True, "values": [pytest.approx(SEED_VALUE)]}
    ]
    assert result["variables"]["x"]["values"] == [0.0, 1.0, 2.0]


def test_expr_errors_from_the_job_keep_their_position(runner: IsolatedRunner) -> None:
    with pytest.raises(ExprError, match=r"line 1, col 3: x is not defined") as info:
        runner.run(evaluate_job, "((x+2)**2+3).mean()")
    assert (info.value.kind, info.value.line, info.value.col) == ("name", 1, 3)


def test_other_job_exceptions_come_back_with_their_own_type(runner: IsolatedRunner) -> None:
    with pytest.raises(ValueError, match=r"invalid literal for int\(\) with base 10: 'abc'"):
        runner.run(int, "abc")


def test_runaway_job_is_stopped_at_its_time_limit_and_the_pool_recovers(runner: IsolatedRunner) -> None:
    start = time.monotonic()
    with pytest.raises(RunnerError, match=r"ran longer than its time limit of 1 s and was stopped") as info:
        runner.run(time.sleep, 60, time_limit=1)
    assert info.value.kind == "time"
    assert time.monotonic() - start < 1 + 30  # the limit, and room for a busy machine; not stopped: 60 s
    assert _seed_ok(runner)


def test_a_cancelled_job_is_stopped_at_once_and_the_pool_recovers(runner: IsolatedRunner) -> None:
    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()
    start = time.monotonic()
    with pytest.raises(RunnerError, match="the job was stopped before it finished, as asked") as info:
        runner.run(time.sleep, 60, cancel=cancel)
    assert info.value.kind == "cancelled"  # not "time": the cancel stopped it, not the time limit
    assert time.monotonic() - start < TIME_LIMIT_S
    assert _seed_ok(runner)


def test_a_job_that_finishes_is_not_affected_by_a_cancel_event(runner: IsolatedRunner) -> None:
    cancel = threading.Event()
    assert runner.run(evaluate_job, SEED_PROGRAM, cancel=cancel)["output"][0]["values"] == [pytest.approx(SEED_VALUE)]
    with pytest.raises(RunnerError, match=r"time limit of 0.3 s") as info:
        runner.run(time.sleep, 60, time_limit=0.3, cancel=cancel)  # the time limit still holds
    assert info.value.kind == "time"


@pytest.mark.parametrize(
    ("job", "args", "message"),
    [
        (os._exit, (3,), r"the worker process exited with code 3 while running the job \(something it ran ended "
                          r"the process, e\.g\. os\._exit\(\)\)"),
        (os.abort, (), r"the worker process was killed by SIGABRT while running the job"),
    ],
)
def test_crashing_job_is_explained_and_the_pool_recovers(
    runner: IsolatedRunner, job: object, args: tuple[object, ...], message: str
) -> None:
    with pytest.raises(RunnerError, match=message) as info:
        runner.run(job, *args)  # type: ignore[arg-type]
    assert info.value.kind == "crash"
    assert _seed_ok(runner)


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="the memory limit uses Linux's RLIMIT_AS")
@pytest.mark.parametrize(
    ("job", "args"),
    [
        (bytearray, (10**10,)),
        (evaluate_job, ("torch.zeros(10**9)", Limits(max_tensor_elements=10**10, max_total_bytes=10**11))),
    ],
)
def test_job_over_its_memory_limit_is_stopped(runner: IsolatedRunner, job: object, args: tuple[object, ...]) -> None:
    with pytest.raises(RunnerError, match=r"ran out of its memory limit \(0.5 GiB\): use smaller tensors") as info:
        runner.run(job, *args)  # type: ignore[arg-type]
    assert info.value.kind == "memory"
    assert _seed_ok(runner)


def test_one_users_runaway_job_does_not_block_another_user(runner: IsolatedRunner) -> None:
    outcome: dict[str, object] = {}
    stop = threading.Event()

    def runaway() -> None:
        try:
            runner.run(time.sleep, 600, cancel=stop)  # holds its worker until stopped or the 20 s limit
        except RunnerError as e:
            outcome["runaway"] = e.kind

    thread = threading.Thread(target=runaway)
    thread.start()
    wait_until(lambda: busy_workers(runner) == 1, timeout=60, what="the runaway taking a worker")
    assert _seed_ok(runner)
    assert thread.is_alive(), "a quick job waited for the runaway to be stopped"
    stop.set()
    thread.join(timeout=60)
    assert outcome == {"runaway": "cancelled"}


def test_concurrent_calls_from_many_threads_all_get_their_own_answer(runner: IsolatedRunner) -> None:
    results: dict[int, float] = {}

    def work(i: int) -> None:
        out = runner.run(evaluate_job, f"x = torch.ones(2) * {i}\nx.sum()")
        results[i] = out["output"][0]["values"][0]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert results == {i: 2.0 * i for i in range(6)}


def test_busy_pool_says_so_after_waiting() -> None:
    with IsolatedRunner(workers=1, max_workers=1, time_limit=60, preload=PRELOAD) as small:
        small.warm_up()
        stop = threading.Event()
        thread = threading.Thread(target=lambda: pytest.raises(RunnerError, small.run, time.sleep, 600, cancel=stop))
        thread.start()
        wait_until(lambda: busy_workers(small) == 1, timeout=60, what="the sleeper taking the one worker")
        with pytest.raises(RunnerError, match=r"all 1 workers are busy: try again in a moment") as info:
            small.run(evaluate_job, SEED_PROGRAM, time_limit=0.3)
        assert info.value.kind == "busy"
        stop.set()
        thread.join(timeout=60)


@pytest.mark.parametrize(
    ("job", "args", "message"),
    [
        (lambda: 1, (), r"must be picklable .*Can't pickle"),
        (threading.Lock, (), r"result could not be sent back"),
    ],
)
def test_unpicklable_jobs_and_results_are_explained(
    runner: IsolatedRunner, job: object, args: tuple[object, ...], message: str
) -> None:
    with pytest.raises(RunnerError, match=message):
        runner.run(job, *args)  # type: ignore[arg-type]
    assert _seed_ok(runner)


def test_closed_runner_refuses_new_jobs() -> None:
    closed = IsolatedRunner(workers=1, max_workers=1)
    closed.close()
    with pytest.raises(RunnerError, match=r"the isolated runner is closed"):
        closed.run(evaluate_job, SEED_PROGRAM)


def test_worker_counts_must_make_sense() -> None:
    with pytest.raises(ValueError, match=r"need 0 <= workers <= max_workers and max_workers >= 1, got workers=3, "
                                         r"max_workers=2"):
        IsolatedRunner(workers=3, max_workers=2)
