"""benchmarks/timing.py, the one clock every benchmark script times with."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

TIMING = Path(__file__).resolve().parents[1] / "benchmarks" / "timing.py"


def _timing() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_timing", TIMING)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


timing = _timing()


class TickingClock:
    """A clock that moves only when a timed call tells it how long it took."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def takes(self, seconds: float) -> float:
        self.now += seconds
        return seconds


def _durations(clock: TickingClock, seconds: list[float]) -> Iterator[float]:
    for s in seconds:
        yield clock.takes(s)


def test_cpu_seconds_times_one_call_and_returns_its_result() -> None:
    clock = TickingClock()
    assert timing.cpu_seconds(lambda: clock.takes(0.25) and "done", clock=clock) == (0.25, "done")


def test_best_cpu_keeps_the_fastest_call_and_runs_before_untimed() -> None:
    clock = TickingClock()
    calls = _durations(clock, [0.5, 0.2, 0.3])
    before: list[int] = []
    seconds, last = timing.best_cpu(lambda: next(calls), 3, clock=clock,
                                    before=lambda: before.append(clock.takes(10.0) and 1))
    assert seconds == pytest.approx(0.2)
    assert last == pytest.approx(0.3)
    assert before == [1, 1, 1]


def test_best_cpu_refuses_no_repeat() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        timing.best_cpu(lambda: None, 0)


def test_taking_turns_reverses_the_order_every_other_round() -> None:
    clock = TickingClock()
    order: list[str] = []

    def call(name: str, seconds: float) -> object:
        return lambda: order.append(name) or clock.takes(seconds)

    times = timing.taking_turns({"a": call("a", 1.0), "b": call("b", 2.0)}, 3, clock=clock,
                                before={"b": lambda: clock.takes(100.0)})
    assert order == ["a", "b", "b", "a", "a", "b"]
    assert times == {"a": [1.0, 1.0, 1.0], "b": [2.0, 2.0, 2.0]}
