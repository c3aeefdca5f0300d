"""One runner per name for the process, the runner's own errors, and a job that ends its worker's process."""

from __future__ import annotations

import os
import pickle
from collections.abc import Iterator

import pytest

from graphviz_app.errors import GraphvizAppError
from graphviz_app.expr import ExprError
from graphviz_app.runner import (
    JobCancelled,
    JobNotPortable,
    JobOutOfMemory,
    JobTimeout,
    RunnerBusy,
    RunnerError,
    RunnerSettings,
    WorkerCrashed,
    close_shared,
    running_shared,
    shared_runner,
)

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the worker tests use POSIX processes")

SMALL = RunnerSettings(workers=1, max_workers=1, time_limit=60.0, memory_limit=None, name="graphviz-app-test")


@pytest.fixture
def named() -> Iterator[str]:
    yield "tests.small"
    close_shared("tests.small")


def test_the_same_name_and_settings_give_the_same_pool(named: str) -> None:
    first = shared_runner(named, SMALL)
    assert shared_runner(named, SMALL) is first
    assert named in running_shared()
    assert first.run(os.getpid) != os.getpid()


def test_the_same_name_with_other_settings_is_refused(named: str) -> None:
    shared_runner(named, SMALL)
    with pytest.raises(ValueError, match=r"the shared runner 'tests.small' already runs with .*give a runner with "
                                         r"other settings a name of its own"):
        shared_runner(named, RunnerSettings(time_limit=1.0))


def test_a_closed_shared_runner_is_started_afresh(named: str) -> None:
    first = shared_runner(named, SMALL)
    close_shared(named)
    assert first.closed and named not in running_shared()
    with pytest.raises(WorkerCrashed, match="the isolated runner is closed"):
        first.run(os.getpid)
    assert shared_runner(named, SMALL) is not first


def test_a_job_calling_os_exit_is_reported_with_its_exit_code(named: str) -> None:
    runner = shared_runner(named, SMALL)
    with pytest.raises(WorkerCrashed, match=r"exited with code 7 while running the job .*os\._exit") as info:
        runner.run(os._exit, 7)
    assert info.value.exit_code == 7 and info.value.kind == "crash"
    assert runner.run(os.getpid) != os.getpid()  # a fresh worker took its place


@pytest.mark.parametrize(
    ("error", "kind"),
    [(JobTimeout, "time"), (JobOutOfMemory, "memory"), (WorkerCrashed, "crash"), (RunnerBusy, "busy"),
     (JobCancelled, "cancelled"), (JobNotPortable, "input")],
)
def test_each_runner_error_has_its_kind_and_is_not_the_language_s(error: type[RunnerError], kind: str) -> None:
    e = error("the job  ran\nlong")
    assert e.kind == kind and e.message == "the job ran long" and str(e) == "the job ran long"
    assert isinstance(e, GraphvizAppError) and not isinstance(e, ExprError)
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is error and back.kind == kind and back.message == e.message


def test_a_relabelled_error_keeps_its_kind_across_processes() -> None:
    back = pickle.loads(pickle.dumps(JobTimeout("stopped", kind="overtime")))
    assert back.kind == "overtime"
    crash = pickle.loads(pickle.dumps(WorkerCrashed("gone", exit_code=-9)))
    assert crash.exit_code == -9
