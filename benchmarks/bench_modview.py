"""Model view: SVG of a 100-layer TransformerEncoder at depth 2 with roll, against the flat 2-layer model.

Run: .venv/bin/python benchmarks/bench_modview.py [--layers 100] [--repeat 3] [--no-roll] [--flat]

The issue's goal: drawing the 100-layer encoder at `depth=2, roll=True` takes
no more than 3x the time of drawing the flat 2-layer encoder. Both graphs are
traced once with `trace_model` (input requiring grad, as if it came from an
embedding, so every layer has the same inside and all 100 roll); the timed step is
`export(graph, "svg", ...)`: collapse, DOT text and the layout by `dot` (engine
"auto"), best of `--repeat`, alternating which goes first. `--no-roll` also times
depth 2 without roll (about 900 nodes), `--flat` the flat 100-layer graph (over a
minute). Not a pass/fail test.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
from timing import cpu_seconds, taking_turns

from graphviz_app.analysis.collapse import collapse
from graphviz_app.drawing.renderer import export
from graphviz_app.model import Graph


def encoder_graph(layers: int) -> tuple[Graph, float, str]:
    """The traced graph of an encoder, the seconds trace_model took, and where it came from."""
    from graphviz_app.tracing.module_trace import trace_model

    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32)
    encoder = torch.nn.TransformerEncoder(layer, num_layers=layers, enable_nested_tensor=False)
    x = torch.randn(5, 3, 16, requires_grad=True)
    seconds, graph = cpu_seconds(lambda: trace_model(encoder, x), clock=time.perf_counter)
    return graph, seconds, "trace_model(nn.TransformerEncoder)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-roll", action="store_true", help="also time depth 2 without roll")
    parser.add_argument("--flat", action="store_true", help="also time the flat 100-layer graph once")
    args = parser.parse_args()
    print(f"Python {platform.python_version()}, torch {torch.__version__}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}")
    small, small_s, source = encoder_graph(2)
    big, big_s, _ = encoder_graph(args.layers)
    print(f"graphs: {source}; 2 layers {len(small.nodes)} nodes (trace {small_s:.2f} s), "
          f"{args.layers} layers {len(big.nodes)} nodes (trace {big_s:.2f} s)")
    shown = collapse(big, depth=2, roll=True)
    print(f"depth 2 + roll draws {len(shown.nodes)} nodes: "
          + ", ".join(n.name for n in shown.nodes if n.kind.value == "module"))
    fns: dict[str, Callable[[], Any]] = {
        "flat 2 layers": lambda: export(small, "svg"),
        f"{args.layers} layers, depth 2, roll": lambda: export(big, "svg", depth=2, roll=True),
        f"{args.layers} layers, collapse only": lambda: collapse(big, depth=2, roll=True),
    }
    if args.no_roll:
        fns[f"{args.layers} layers, depth 2"] = lambda: export(big, "svg", depth=2)
    # wall time: the layout runs in Graphviz's `dot`, another process
    best = {name: min(seconds) for name, seconds in taking_turns(fns, args.repeat, clock=time.perf_counter).items()}
    base = best["flat 2 layers"]
    print(f"\n| drawing (export to SVG, layout by dot) | best of {args.repeat}, s | / flat 2 layers |")
    print("|---|---|---|")
    for name, seconds in best.items():
        print(f"| {name} | {seconds:.3f} | {seconds / base:.2f}x |")
    if args.flat:
        seconds, _ = cpu_seconds(lambda: export(big, "svg"), clock=time.perf_counter)
        print(f"| {args.layers} layers flat (once) | {seconds:.1f} | {seconds / base:.0f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
