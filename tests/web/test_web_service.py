"""Programs run in the isolated worker: a hostile or runaway one harms nobody else."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from waiting import wait_until

from graphviz_app.runner import IsolatedRunner
from graphviz_app.web import service
from graphviz_app.web.results import Analysis, Failure
from graphviz_app.web.urlstate import SEED_PROGRAM, CheckInput, Options

# Ops of ~3 s each, in a loop: one op of ~30 s is now refused before it runs (Limits.max_multiply_adds).
RUNAWAY = "a = torch.randn(400, 20000)\nfor i in range(1000):\n    b = torch.cdist(a, a, p=1).sum()\nb"
TOL = (1e-6, 1e-5, 1e-3)


@pytest.fixture(scope="module")
def runner() -> Iterator[IsolatedRunner]:
    # A limit that bounds a hang: on a busy machine even the seed program can take seconds.
    with replace(service.SETTINGS, workers=2, max_workers=3, time_limit=60.0).start() as r:
        r.warm_up()
        yield r


def busy_workers(runner: IsolatedRunner) -> int:
    return runner._count - len(runner._idle)  # noqa: SLF001 - test probe


def seed_grad(runner: IsolatedRunner) -> str:
    result = service.analyze(runner, SEED_PROGRAM, Options())
    assert isinstance(result, Analysis), str(result)
    return result.grads[0].text


@pytest.mark.parametrize(
    ("program", "words"),
    [
        ("().__class__.__bases__", "attribute names starting with _ are not allowed"),
        ("torch.randn(int(3e10))", "30,000,000,000"),
        ("x = torch.zeros(3)\nx.__class__.__subclasses__()", "attribute names starting with _"),
    ],
)
def test_a_hostile_program_is_refused_and_the_next_one_runs(runner: IsolatedRunner, program: str, words: str) -> None:
    result = service.analyze(runner, program, Options())
    assert isinstance(result, Failure)
    assert words in result.message
    assert seed_grad(runner) == "[1.3333, 2.0000, 2.6667]"


TIME_LIMIT_S = 5.0


class Limited:
    """`runner` with its own time limit for the jobs sent through it."""

    def __init__(self, runner: IsolatedRunner, time_limit: float) -> None:
        self.runner, self.time_limit = runner, time_limit

    def run(self, job: Any, *args: Any) -> Any:
        return self.runner.run(job, *args, time_limit=self.time_limit)


@pytest.mark.slow  # runs into the 5 s limit
def test_a_runaway_program_is_stopped_at_the_time_limit(runner: IsolatedRunner) -> None:
    limited = Limited(runner, TIME_LIMIT_S)
    start = time.monotonic()
    result = service.analyze(limited, RUNAWAY, Options())
    assert isinstance(result, Failure)
    assert result.kind == "time" and result.transient
    assert "time limit of 5 s" in result.message  # the runner's limit stopped it, not the language's 10 s
    assert time.monotonic() - start < TIME_LIMIT_S + 30  # the limit, with room for a busy machine
    assert seed_grad(runner) == "[1.3333, 2.0000, 2.6667]"


class Stoppable:
    """`runner` with a long time limit for one job, which the test stops by setting `stop`."""

    def __init__(self, runner: IsolatedRunner) -> None:
        self.runner, self.stop = runner, threading.Event()

    @property
    def time_limit(self) -> float:
        return 60.0

    def run(self, job: Any, *args: Any) -> Any:
        return self.runner.run(job, *args, time_limit=self.time_limit, cancel=self.stop)


def test_a_runaway_program_does_not_block_another_user(runner: IsolatedRunner) -> None:
    # The runaway holds its worker until the language's 10 s limit, or until stopped here.
    held = Stoppable(runner)
    runaway = threading.Thread(target=service.analyze, args=(held, RUNAWAY, Options()))
    runaway.start()
    wait_until(lambda: busy_workers(runner) == 1, timeout=60, what="the runaway taking a worker")
    try:
        assert seed_grad(runner) == "[1.3333, 2.0000, 2.6667]"
        assert runaway.is_alive(), "the quick program was answered only after the runaway ended"
    finally:
        held.stop.set()
        runaway.join(timeout=60)


def test_the_gradient_check_runs_in_the_worker(runner: IsolatedRunner) -> None:
    right = service.check_gradient(runner, SEED_PROGRAM, Options(), CheckInput("x", "2*(x+2)/3"), TOL)
    wrong = service.check_gradient(runner, SEED_PROGRAM, Options(), CheckInput("x", "2*(x+2)"), TOL)
    assert right.passed is True
    assert wrong.passed is False


@pytest.mark.parametrize(
    ("check", "words"),
    [(CheckInput("", "2*x"), "choose the variable"), (CheckInput("x", "  "), "type your hand-derived gradient")],
)
def test_an_incomplete_check_asks_for_what_is_missing(runner: IsolatedRunner, check: CheckInput, words: str) -> None:
    result = service.check_gradient(runner, SEED_PROGRAM, Options(), check, TOL)
    assert isinstance(result, Failure) and words in result.message


def test_the_devices_are_cpu_and_each_cuda_device(runner: IsolatedRunner) -> None:
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    assert service.devices(runner) == ("cpu", *(f"cuda:{i}" for i in range(count)))


def test_png_is_drawn_in_the_worker(runner: IsolatedRunner) -> None:
    result = service.analyze(runner, SEED_PROGRAM, Options())
    assert isinstance(result, Analysis)
    assert service.png(runner, result.graph_json, "LR").startswith(b"\x89PNG")


@pytest.mark.parametrize(
    ("program", "where", "words"),
    [
        ("x = (", (1, 5), "syntax error"),
        ("x = torch.arange(3.)\nx.__class__", (2, 1), "attribute names starting with _"),
        ("import os", (1, 1), "import is not allowed"),
    ],
)
def test_parse_errors_show_while_typing_with_their_position(program: str, where: tuple[int, int], words: str) -> None:
    problem = service.syntax_problem(program)
    assert problem is not None
    assert (problem.line, problem.col) == where
    assert words in problem.message


def test_a_valid_program_has_no_parse_problem() -> None:
    assert service.syntax_problem(SEED_PROGRAM) is None
