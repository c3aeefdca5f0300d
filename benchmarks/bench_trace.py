"""trace + render against torchviz's make_dot on one network-shaped graph, and trace of deep chains.

Run: .venv/bin/python benchmarks/bench_trace.py [--ops 20000] [--repeat 5] [--chains 10000 100000 1000000]
     .venv/bin/python benchmarks/bench_trace.py --profile   # cProfile of ours on the network graph

1. A network-shaped graph of about `--ops` autograd nodes (a residual stack of
   small Linear + tanh blocks, each block its own weight and bias leaves) is
   drawn, in the same process and alternating which goes first, by
   `render(trace(y, params)).source` (ours, no layout) and by torchviz's
   `make_dot(y, params, show_saved=True, show_attrs=True).source`. Both show
   saved tensors and attributes; the best of `--repeat` runs is compared.
2. `trace` of chains of 10k, 100k and 1M `y = y + 1` ops; the 1M/100k ratio
   says whether tracing stays linear (10 is linear).

Every graph is built, traced and freed inside `call_with_large_stack`: freeing
a chain of more than ~100k ops that Python has walked overflows the default
C stack with torch 2.13. Nothing here is a pass/fail test.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import os
import platform
import pstats
import sys
import time
import warnings
from typing import Any

import torch
from timing import best_cpu

from graphviz_app import render, trace
from graphviz_app.tracing.big_stack import call_with_large_stack

WIDTH = 4


def network(ops: int) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """A residual stack of Linear + tanh blocks with about `ops` autograd nodes.

    One block, h = tanh(h @ w.T + b) + h, makes six nodes: TBackward0,
    AddmmBackward0, TanhBackward0, AddBackward0 and two AccumulateGrad.
    """
    torch.manual_seed(0)
    params: dict[str, torch.Tensor] = {}
    h = torch.randn(2, WIDTH)
    for i in range(max(1, ops // 6)):
        w = torch.randn(WIDTH, WIDTH, requires_grad=True)
        b = torch.randn(WIDTH, requires_grad=True)
        params[f"block{i}.weight"], params[f"block{i}.bias"] = w, b
        h = torch.tanh(torch.nn.functional.linear(h, w, b)) + h
    return h.sum(), params


def compare_with_torchviz(ops: int, repeat: int) -> dict[str, Any]:
    import torchviz  # a dev dependency

    y, params = network(ops)
    graph = trace(y, params)
    nodes = sum(1 for n in graph.nodes if n.kind.value in ("op", "leaf"))
    ours_times: list[float] = []
    theirs_times: list[float] = []
    ours_chars = theirs_chars = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # torchviz's LooseVersion
        for i in range(repeat):
            order = [("ours", lambda: render(trace(y, params)).source),
                     ("torchviz", lambda: torchviz.make_dot(y, params, show_attrs=True, show_saved=True).source)]
            for name, fn in order if i % 2 == 0 else order[::-1]:
                t, source = best_cpu(fn, 1, clock=time.perf_counter, before=gc.collect)
                if name == "ours":
                    ours_times.append(t)
                    ours_chars = len(source)
                else:
                    theirs_times.append(t)
                    theirs_chars = len(source)
    return {
        "nodes": nodes,
        "graph_nodes": len(graph.nodes),
        "ours_s": min(ours_times),
        "torchviz_s": min(theirs_times),
        "ours_all": ours_times,
        "torchviz_all": theirs_times,
        "ours_chars": ours_chars,
        "torchviz_chars": theirs_chars,
    }


def chain_trace_time(n: int, repeat: int) -> tuple[float, float]:
    """Best wall and best CPU seconds of tracing one chain of `n` ops."""
    x = torch.ones(2, requires_grad=True)
    y = x
    for _ in range(n):
        y = y + 1
    wall, cpu = float("inf"), float("inf")
    for _ in range(repeat):
        gc.collect()
        t0, c0 = time.perf_counter(), time.process_time()
        graph = trace(y, {"x": x})
        wall, cpu = min(wall, time.perf_counter() - t0), min(cpu, time.process_time() - c0)
        assert len(graph.nodes) == n + 2
        del graph
    return wall, cpu


def profile_ours(ops: int) -> None:
    y, params = network(ops)
    profiler = cProfile.Profile()
    profiler.enable()
    render(trace(y, params)).source  # noqa: B018
    profiler.disable()
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
    pstats.Stats(profiler).sort_stats("tottime").print_stats(15)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--chains", type=int, nargs="*", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    sys.setrecursionlimit(1_000_000)  # torchviz recurses once per op (run on a 1 GiB stack)

    if args.profile:
        call_with_large_stack(profile_ours, args.ops)
        return

    print(f"# {time.strftime('%Y-%m-%d')}, {platform.node()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, torch {torch.__version__}, CUDA {torch.cuda.is_available()}")
    r = call_with_large_stack(compare_with_torchviz, args.ops, args.repeat)
    print(f"\n## trace + render (no layout) vs torchviz make_dot(show_saved, show_attrs), best of {args.repeat}")
    print(f"network graph: {r['nodes']} autograd nodes ({r['graph_nodes']} nodes with tensors and saved)")
    print("| tool | best s | all runs s | DOT chars |\n|---|---|---|---|")
    for name in ("ours", "torchviz"):
        runs = ", ".join(f"{t:.2f}" for t in r[f"{name}_all"])
        print(f"| {name} | {r[f'{name}_s']:.3f} | {runs} | {r[f'{name}_chars']:,} |")
    print(f"ratio torchviz/ours: {r['torchviz_s'] / r['ours_s']:.2f}x (above 1: ours is faster)")

    if args.chains:
        print("\n## trace of a y = y + 1 chain (build excluded; best of 3, of 2 for 1M)")
        print("| ops | wall s | CPU s | us/op (wall) |\n|---|---|---|---|")
        times: dict[int, tuple[float, float]] = {}
        for n in args.chains:
            times[n] = call_with_large_stack(chain_trace_time, n, 2 if n >= 1_000_000 else 3)
            wall, cpu = times[n]
            print(f"| {n:,} | {wall:.2f} | {cpu:.2f} | {wall / n * 1e6:.1f} |", flush=True)
        if 100_000 in times and 1_000_000 in times:
            (w1, c1), (w0, c0) = times[1_000_000], times[100_000]
            print(f"1M/100k: {w1 / w0:.1f}x wall, {c1 / c0:.1f}x CPU (10x is linear; goal within 12x)")


if __name__ == "__main__":
    main()
