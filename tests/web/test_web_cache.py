"""The shared result cache: a busy pool or a time-out is never served to the next visitor."""

from __future__ import annotations

import pytest

from graphviz_app.web.cache import ResultCache, cacheable, size_of
from graphviz_app.web.results import Failure


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize("kind", ["busy", "time", "overtime", "crash", "memory", "internal", "cancelled"])
def test_a_failure_of_the_moment_is_not_stored_and_the_next_visitor_runs_the_program(kind: str) -> None:
    cache = ResultCache()
    runs: list[int] = []

    def compute() -> str | Failure:
        runs.append(1)
        return Failure("all 4 workers are busy", kind=kind) if len(runs) == 1 else "<svg/>"

    assert isinstance(cache.get_or_run("k", compute), Failure)
    assert cache.get_or_run("k", compute) == "<svg/>"  # the next visitor ran it again
    assert cache.get_or_run("k", compute) == "<svg/>"  # and now it is served
    assert len(runs) == 2


@pytest.mark.parametrize("kind", ["syntax", "refused", "name", "shape"])
def test_an_error_of_the_program_itself_is_served_again(kind: str) -> None:
    assert cacheable(Failure("line 2: syntax error", kind=kind))
    cache = ResultCache()
    cache.put("k", Failure("line 2: syntax error", kind=kind))
    assert cache.get("k") == Failure("line 2: syntax error", kind=kind)


def test_the_cache_is_bounded_by_bytes_least_recently_used_first() -> None:
    big = "x" * 10_000
    cache = ResultCache(max_bytes=3 * size_of(big) + 100)
    for key in "abc":
        cache.put(key, big)
    assert cache.get("a") == big  # a is now the most recently used
    cache.put("d", big)
    assert cache.get("b") is None
    assert [cache.get(k) is not None for k in "acd"] == [True, True, True]
    assert cache.bytes <= cache.max_bytes


def test_a_result_larger_than_the_whole_cache_is_not_stored_and_evicts_nothing() -> None:
    cache = ResultCache(max_bytes=1000)
    cache.put("small", "s")
    assert not cache.put("huge", "x" * 5000)
    assert cache.get("small") == "s" and cache.get("huge") is None


def test_entries_expire_after_their_age() -> None:
    clock = Clock()
    cache = ResultCache(max_age_s=60, clock=clock)
    cache.put("k", "<svg/>")
    clock.now = 59
    assert cache.get("k") == "<svg/>"
    clock.now = 61
    assert cache.get("k") is None
    assert len(cache) == 0 and cache.bytes == 0


def test_the_cache_is_bounded_by_entries() -> None:
    cache = ResultCache(max_entries=2)
    for key in "abc":
        cache.put(key, key)
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == (None, "b", "c")
