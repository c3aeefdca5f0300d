"""Speed of the memory replay (`memory_timeline`) against the trace that made its graph, on graphs of several shapes.

Run: .venv/bin/python benchmarks/bench_replay.py [--sizes 10000 40000 160000] [--repeat 3] [--shapes ...]
[--profile SHAPE]

Shapes (each built fresh per size; `--sizes` is the graph's node count aimed at):
- chain: `y = y * w` over one leaf `w` (an op and two saved tensors per step, the leaf used by every op);
- fan: one tensor used by every op of a sum of `h * c_i` terms (a gradient summed into one buffer many times);
- fanin: wide fan-in, `torch.stack([h * c_i ...]).sum()`: one op sending a gradient to every term;
- shared: `torch.stack([h * w_i ...]).sum()` with every `w_i` a parameter: one tensor (`h`) saved by every op (a
  storage with 40,000 savers at 160,000 nodes; the replay was quadratic in them until this round);
- transformer: a stack of torch's `TransformerEncoderLayer` (d_model 8, 2 heads, about 80 nodes a layer, 12
  parameters each), run on CPU and traced like chain and fan;
- gpt: GPT-style blocks (attention, MLP, layer norms) on meta, traced by `forecast`'s step.

For each: the trace's CPU time (`trace(..., show_saved=True)`, or the step's walk for gpt) and the replay's
(`memory_timeline(graph)`), best of `--repeat`, and their ratio in the same run; the trace and the replay are
timed in turn (trace, replay, trace, ...), so that both see the same load on a shared machine. `--profile SHAPE`
prints the replay's cProfile (top 25 by own time) at the first size. CPU time (`time.process_time`) of this
single-threaded process. Nothing here is a pass/fail test.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from timing import cpu_seconds  # noqa: E402

from graphviz_app import memory_timeline, trace  # noqa: E402
from graphviz_app.model import Graph  # noqa: E402
from graphviz_app.tracing.big_stack import call_with_large_stack  # noqa: E402


def _chain(nodes: int) -> torch.Tensor:
    w = torch.ones(4, requires_grad=True)
    y = w
    for _ in range(max(1, nodes // 3)):
        y = y * w
    return y.sum()


def _fan(nodes: int) -> torch.Tensor:
    h = torch.ones(4, requires_grad=True).exp()
    total = h.sum()
    for i in range(max(1, nodes // 4)):
        total = total + (h * float(i)).sum()
    return total


def _fanin(nodes: int) -> torch.Tensor:
    h = torch.ones(4, requires_grad=True).exp()
    return torch.stack([h * float(i) for i in range(max(1, nodes // 2))]).sum()


def _shared(nodes: int) -> torch.Tensor:
    h = torch.ones(4, requires_grad=True).exp()
    weights = [torch.ones(4, requires_grad=True) for _ in range(max(1, nodes // 4))]
    return torch.stack([h * w for w in weights]).sum()


def _transformer(nodes: int) -> torch.Tensor:
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16, dropout=0.0, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, num_layers=max(1, nodes // 79), enable_nested_tensor=False)
    return model(torch.randn(2, 4, 8)).sum()


_BUILDS = {"chain": _chain, "fan": _fan, "fanin": _fanin, "shared": _shared, "transformer": _transformer}


def _gpt(nodes: int) -> tuple[Callable[[], Any], Callable[[Any], tuple[Graph, tuple[str, ...] | None]]]:
    from bench_memory import GPT  # the same GPT-style model as the timeline benchmark there

    from graphviz_app.tracing.memory.step import Step, run_step
    blocks = max(1, nodes // 83)  # about 83 graph nodes per block
    with torch.device("meta"):
        model = GPT(blocks, 64, 4, 1000, 64)
    step = Step(model, (torch.empty(4, 64, dtype=torch.long, device="meta"),))
    return lambda: run_step(step, measure=False), lambda run: (run.graph, run.roots)


def bench(shape: str, nodes: int, repeat: int, profile: bool) -> None:
    if shape == "gpt":
        traced_by, read = _gpt(nodes)
        what = "step trace on meta (forward + walk)"
    else:
        out = _BUILDS[shape](nodes)
        traced_by = lambda: call_with_large_stack(lambda: trace(out, show_saved=True))  # noqa: E731
        read = lambda graph: (graph, None)  # noqa: E731
        what = "trace"
    traced = replayed = float("inf")
    for _ in range(repeat):  # in turn: a burst of load on the machine slows both alike
        seconds, made = cpu_seconds(traced_by)
        traced = min(traced, seconds)
        graph, roots = read(made)
        del made
        seconds, timeline = cpu_seconds(lambda g=graph, r=roots: memory_timeline(g, roots=r))
        replayed = min(replayed, seconds)
        del timeline
    timeline = memory_timeline(graph, roots=roots)
    print(f"{shape:11} {len(graph.nodes):>8,} nodes {len(timeline.steps) - 1:>7,} steps: replay {replayed:.3f} s, "
          f"{what} {traced:.3f} s, ratio {replayed / traced:.2f}, {1e6 * replayed / len(graph.nodes):.1f} us/node",
          flush=True)
    if profile:
        prof = cProfile.Profile()
        prof.enable()
        memory_timeline(graph, roots=roots)
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 40_000, 160_000])
    shapes = [*_BUILDS, "gpt"]
    parser.add_argument("--shapes", nargs="+", default=shapes, choices=shapes)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", choices=shapes)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    torch.set_num_threads(1)
    for shape in args.shapes:
        for i, size in enumerate(args.sizes):
            bench(shape, size, args.repeat, profile=args.profile == shape and i == 0)


if __name__ == "__main__":
    main()
