"""Beyond one eager backward: diff of two 10,000-node graphs, opening a compiled region, the saved-hook check.

Run: .venv/bin/python benchmarks/bench_beyond.py [--layers 130] [--repeat 7] [--region-repeat 101] [--no-compile]

1. diff: two traces of a `--layers`-layer TransformerEncoder (about 10,000 nodes each at
   130 layers): `diff(a, a_again)` (the same model), `diff(a, b)` (b has one more layer),
   and the diff drawing's view graph (`diff_view`) and DOT text. The issue's budget: under 1 s.
2. compiled region: a TransformerEncoderLayer compiled with `backend="aot_eager"`; the cost of
   opening its region (`add_regions`, reading the backward graph, plus `show_regions` putting
   it in place) against `trace()` of the same layer run eagerly, the first time (every kept
   read forgotten before each run, untimed) and again (a training loop tracing each step
   reads a compiled function's backward graph once). The issue's budget: no more.
3. the saved-tensor-hook check of `saved_values` (one raw read per node that saves tensors):
   `trace()` of the encoder with the check, and with it switched off, in one process.

CPU time (`time.process_time`, the work is single-threaded Python), median of `--repeat`
runs, alternating which runs first. Not a pass/fail test.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
from collections.abc import Callable
from typing import Any

import torch
from timing import taking_turns
from torch import nn

from graphviz_app import Graph, trace, trace_model
from graphviz_app.analysis.diff import diff
from graphviz_app.analysis.diff_view import diff_view
from graphviz_app.analysis.regions import region_names, show_regions
from graphviz_app.drawing.diff_style import render_diff
from graphviz_app.tracing.compiled import add_regions
from graphviz_app.tracing.compiled_graph import forget_backward_graphs
from graphviz_app.tracing.torch_internals import saved as torch_internals  # the saved-hook cache lives here
from graphviz_app.tracing.walker import Walker, WalkOptions


def _median(fns: dict[str, Callable[[], Any]], repeat: int,
            before: dict[str, Callable[[], Any]] | None = None) -> dict[str, float]:
    """Median CPU time of each function, run in turn `repeat` times, alternating which runs first.

    `before[name]`, when given, runs untimed before each timed call of `name` (to empty a cache).
    """
    times = taking_turns(fns, repeat, before=before)
    return {name: statistics.median(found) for name, found in times.items()}


def _encoder(layers: int, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    layer = nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, dropout=0.0)
    return nn.TransformerEncoder(layer, num_layers=layers, enable_nested_tensor=False)


def bench_diff(layers: int, repeat: int) -> None:
    x = torch.randn(5, 3, 16, requires_grad=True)
    a = trace_model(_encoder(layers), x)
    again = trace_model(_encoder(layers, seed=1), x)
    b = trace_model(_encoder(layers + 1), x)
    print(f"diff: graphs of {len(a.nodes):,} / {len(again.nodes):,} / {len(b.nodes):,} nodes "
          f"({len(a.edges):,} edges)")
    found = diff(a, b)
    print(f"  a vs b: {len(found.only_b)} nodes added, {len(found.edges_only_a) + len(found.edges_only_b)} edges "
          f"in one only; a vs a_again empty: {diff(a, again).empty}")
    best = _median({
        "diff(a, a_again)": lambda: diff(a, again),
        "diff(a, b)": lambda: diff(a, b),
        "diff_view(a, b)": lambda: diff_view(a, b, found),
        "render_diff(a, b) DOT": lambda: render_diff(a, b, found).source,
    }, repeat)
    for name, seconds in best.items():
        print(f"  {name:24s} {seconds:7.3f} s")


def bench_region(repeat: int) -> None:
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, dropout=0.0, batch_first=True)
    x = torch.randn(4, 16, 64, requires_grad=True)
    eager = layer(x).sum()
    torch.compiler.reset()
    compiled = torch.compile(layer, backend="aot_eager")(x).sum()
    plain = trace(compiled)  # the region's node, traced; its regions are what is timed below
    (region,) = plain.regions
    walker = Walker(WalkOptions(leaf_names={}), [])
    walker.walk([("output", compiled)])
    fns = walker.fn_by_node_id()
    bare = type(plain)(plain.nodes, plain.edges)  # without regions, as the walk leaves it
    names = region_names(plain)
    eager_graph = trace(eager)
    eager_ops = sum(1 for n in eager_graph.nodes if n.kind.value == "op")
    print(f"compiled region: {len(region.nodes)} backward ops inside; the eager layer traces {eager_ops} ops "
          f"({len(eager_graph.nodes)} nodes)")

    def open_region() -> Graph:
        return show_regions(add_regions(bare, fns), expanded=names)

    best = _median({
        "trace(eager layer)": lambda: trace(eager),
        "open, first time": open_region,  # every backward graph read and name forgotten first (untimed)
        "open, again": open_region,  # the same compiled function opened again: its read is kept
    }, repeat, before={"open, first time": forget_backward_graphs})
    walker.release()
    for name, seconds in best.items():
        print(f"  {name:24s} {seconds * 1000:7.2f} ms")
    for name in ("open, first time", "open, again"):
        print(f"  ratio {name} / eager trace: {best[name] / best['trace(eager layer)']:.2f}")


def bench_hook_check(layers: int, repeat: int) -> None:
    y = _encoder(layers)(torch.randn(5, 3, 16, requires_grad=True)).sum()
    trace(y)
    on = dict(torch_internals._raw_getters)

    def run(check: bool) -> None:
        torch_internals._raw_getters.clear()
        torch_internals._raw_getters.update(on if check else dict.fromkeys(on))
        trace(y)

    best = _median({"with the check": lambda: run(True), "without": lambda: run(False)}, repeat)
    torch_internals._raw_getters.clear()
    torch_internals._raw_getters.update(on)
    print(f"saved-hook check, trace() of {layers} layers:")
    for name, seconds in best.items():
        print(f"  {name:24s} {seconds * 1000:7.1f} ms")
    print(f"  ratio: {best['with the check'] / best['without']:.3f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=130)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--region-repeat", type=int, default=101, help="runs of the compiled region (ms each)")
    parser.add_argument("--no-compile", action="store_true", help="skip the compiled region (torch.compile is slow)")
    args = parser.parse_args()
    print(f"python {platform.python_version()}, torch {torch.__version__}, {os.cpu_count()} CPUs, {platform.machine()}")
    bench_diff(args.layers, args.repeat)
    if not args.no_compile:
        bench_region(args.region_repeat)
    bench_hook_check(40, args.repeat * 2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
