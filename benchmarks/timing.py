"""The benchmarks' one clock: CPU time of a call, once, best of several, or several calls taking turns.

CPU time (`time.process_time`) because the work measured is single-threaded
Python and these machines are noisy; a script timing a child process or a
browser passes `clock=time.perf_counter`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["best_cpu", "cpu_seconds", "taking_turns"]

T = TypeVar("T")
Clock = Callable[[], float]


def cpu_seconds(fn: Callable[[], T], *, clock: Clock = time.process_time) -> tuple[float, T]:
    """The seconds one call of `fn` took, and what it returned."""
    start = clock()
    result = fn()
    return clock() - start, result


def best_cpu(fn: Callable[[], T], repeat: int, *, clock: Clock = time.process_time,
             before: Callable[[], object] | None = None) -> tuple[float, T]:
    """The fastest of `repeat` calls of `fn` (each after `before()`, untimed), and the last call's result."""
    if repeat < 1:
        raise ValueError(f"repeat is how many times to call, at least 1, got {repeat}")
    best = float("inf")
    for _ in range(repeat):
        if before is not None:
            before()
        seconds, result = cpu_seconds(fn, clock=clock)
        best = min(best, seconds)
    return best, result


def taking_turns(fns: dict[str, Callable[[], object]], repeat: int, *, clock: Clock = time.process_time,
                 before: dict[str, Callable[[], object]] | None = None) -> dict[str, list[float]]:
    """Every round calls each of `fns` once, the order reversed every other round; the seconds of each call, by name.

    `before[name]()`, where given, runs untimed just before that name's call.
    """
    times: dict[str, list[float]] = {name: [] for name in fns}
    names = list(fns)
    for round_number in range(repeat):
        for name in names if round_number % 2 == 0 else reversed(names):
            if before and name in before:
                before[name]()
            times[name].append(cpu_seconds(fns[name], clock=clock)[0])
    return times
