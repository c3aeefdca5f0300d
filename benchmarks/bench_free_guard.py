"""What the free guard of trace() costs: a traced chain with the guard against the same trace without it.

Run: .venv/bin/python benchmarks/bench_free_guard.py [--ops 300000] [--repeat 3]

trace() of more than FREE_GUARD_NODES walked nodes hands the walked nodes to a
keeper so the graph frees one node at a time (graphviz_app/deep.py). The peer
is the same trace() with the guard switched off (the threshold raised past the
chain), run on the big-stack thread so that freeing it cannot crash. Both runs
build, trace and free the chain on that thread; only trace() and the free (CPU time of that thread)
(`del y` and, for the guard, the sweep that releases the keeper) are timed.
Best of `--repeat`, alternating which goes first. Not a pass/fail test.
"""

from __future__ import annotations

import argparse
import gc
import time

import torch

import graphviz_app.tracing.tracer as tracer
from graphviz_app import trace
from graphviz_app.tracing.big_stack import call_with_large_stack, sweep_released


def _one(ops: int, guarded: bool) -> tuple[float, float]:
    tracer.FREE_GUARD_NODES = 50_000 if guarded else ops * 10
    x = torch.zeros(1, requires_grad=True)
    y = x
    for _ in range(ops):
        y = y * 1.0
    start = time.thread_time()
    trace(y, show_saved=False, show_attrs=False)
    traced = time.thread_time()
    del y
    sweep_released()
    freed = time.thread_time()
    return traced - start, freed - traced


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=300_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    best: dict[bool, tuple[float, float]] = {}
    gc.collect()
    for r in range(args.repeat):
        for guarded in ((True, False) if r % 2 == 0 else (False, True)):
            t, f = call_with_large_stack(_one, args.ops, guarded)
            old = best.get(guarded, (float("inf"), float("inf")))
            best[guarded] = (min(old[0], t), min(old[1], f))
    for guarded, label in ((True, "with the guard (default)"), (False, "guard off (peer)")):
        t, f = best[guarded]
        print(f"{label:26s} trace {t:6.2f} s  free {f:6.2f} s  total {t + f:6.2f} s")
    ratio = sum(best[True]) / sum(best[False])
    print(f"guard / no guard, trace + free of a {args.ops:,}-op chain: {ratio:.2f}x")


if __name__ == "__main__":
    main()
