"""Freeing a big traced graph: no crash on the default stack."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
import torch

import graphviz_app.tracing.big_stack as big_stack
import graphviz_app.tracing.big_stack as deep
from graphviz_app import trace

ROOT = Path(__file__).resolve().parents[2]

FREE_SCRIPT = textwrap.dedent(
    """
    import gc, sys, warnings, torch
    from graphviz_app import trace
    x = torch.zeros(1, requires_grad=True)
    y = x
    for i in range(300_000):
        y = y * 1.0 if i % 1000 else y + x  # a chain with skip edges to the leaf
    graph = trace(y, {"x": x}, show_saved=False, show_attrs=False)
    print("traced", len(graph.nodes), flush=True)
    del y
    {finish}
    print("freed", flush=True)
    """
)


def _run(finish: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    script = FREE_SCRIPT.replace("{finish}", finish)
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=600, cwd=ROOT
    )


@pytest.mark.slow
@pytest.mark.parametrize("finish", ["gc.collect()", "pass"], ids=["del-then-collect", "del-then-exit"])
def test_a_300k_chain_traced_on_the_main_thread_frees_without_a_crash(finish: str) -> None:
    """Before the fix: exit code -11 (SIGSEGV) right after 'traced'."""
    done = _run(finish)
    assert done.returncode == 0, f"exit {done.returncode}: {done.stdout}{done.stderr[-2000:]}"
    assert done.stdout.split() == ["traced", "300002", "freed"]


def test_the_saved_memory_of_a_guarded_graph_is_returned_at_the_next_collection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import gc
    import weakref

    monkeypatch.setattr(big_stack, "FREE_GUARD_NODES", 10)
    x = torch.zeros(3, requires_grad=True)
    big = torch.ones(3)
    big_ref = weakref.ref(big)
    y = x * big
    del big
    for _ in range(20):
        y = y * 1.0
    trace(y)
    del y
    gc.collect()
    assert big_ref() is None, "the graph (and the tensor it saved) must be freed"


def test_a_graph_still_held_by_an_intermediate_tensor_is_kept_until_that_dies(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import gc
    import weakref

    monkeypatch.setattr(big_stack, "FREE_GUARD_NODES", 10)
    x = torch.zeros(3, requires_grad=True)
    big = torch.ones(3)
    big_ref = weakref.ref(big)
    h = x * big  # MulBackward0 saves big
    del big
    y = h
    for _ in range(20):
        y = y * 1.0
    trace(y)
    del y
    gc.collect()
    assert big_ref() is not None, "h still needs its part of the graph"
    assert h.grad_fn is not None and h.sum().grad_fn is not None
    del h
    gc.collect()
    assert big_ref() is None


def test_a_small_walk_keeps_nothing() -> None:
    x = torch.zeros(3, requires_grad=True)
    y = (x * 2).sum()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        trace(y)
    assert deep._kept == [] and vars(y) == {}


def test_a_guarded_graph_is_freed_soon_after_its_output_dies_without_a_full_collection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A training loop tracing every step must not pile graphs up until a full collection."""
    import weakref

    monkeypatch.setattr(big_stack, "FREE_GUARD_NODES", 10)
    refs = []
    for _ in range(3):
        x = torch.zeros(3, requires_grad=True)
        big = torch.ones(3)
        refs.append(weakref.ref(big))
        y = x * big
        del big
        for _ in range(20):
            y = y * 1.0
        trace(y)
        del y
        junk = [[] for _ in range(5000)]  # enough allocations for a young collection
        del junk
    assert [r() is None for r in refs] == [True, True, True]


def test_outputs_of_a_guarded_trace_save_and_load_as_before(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(big_stack, "FREE_GUARD_NODES", 10)
    x = torch.ones(3, requires_grad=True)
    y = x
    for _ in range(20):
        y = y * 2.0
    trace(y)
    assert vars(y) == {}
    torch.save(y, tmp_path / "y.pt")
    assert torch.equal(torch.load(tmp_path / "y.pt"), y.detach())  # weights_only=True, torch's default


def test_a_graph_traced_twice_is_still_freed(monkeypatch: pytest.MonkeyPatch) -> None:
    import gc
    import weakref

    monkeypatch.setattr(big_stack, "FREE_GUARD_NODES", 10)
    x = torch.zeros(3, requires_grad=True)
    big = torch.ones(3)
    big_ref = weakref.ref(big)
    y = x * big
    del big
    for _ in range(20):
        y = y * 1.0
    trace(y)
    trace(y, show_saved=False)  # a notebook re-runs a cell
    trace((y * 2).sum())  # a bigger graph around the same nodes
    del y
    gc.collect()
    assert big_ref() is None
    assert deep._kept == [] and deep._kept_ids == set()
