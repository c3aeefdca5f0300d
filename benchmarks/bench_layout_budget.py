"""The RNN tagger's picture before and after the layout deadline, and the data behind the layout cost model.

Run: .venv/bin/python benchmarks/bench_layout_budget.py [--steps 32] [--cap 120] [--deadline 60]
     .venv/bin/python benchmarks/bench_layout_budget.py --fit [--fit-steps 5 10 15] [--cap 300]

Default mode: the Embedding -> 2-layer LSTM -> GRU -> Linear tagger of the
issue (about 800 nodes at 32 steps; on CPU the GRU unrolls), drawn with
`save(graph, "rnn.svg", depth=2, roll=True)`:
- before: what the library did until now, the same view laid out by `dot`
  (the engine its 2,000-node rule chose) with no deadline; capped at `--cap`
  seconds and reported as a time-out past it;
- after: `save` as it is now, with its default deadline (or `--deadline`):
  the cost model's engine, and a folded view if the full one cannot finish.
Wall seconds and the layout programs' CPU seconds (children of this process).

`--fit`: for RNN taggers of `--fit-steps` steps (the same DOT as above), with
and without module frames, each program's CPU seconds against the layout work
`cost.measure` predicts from (nodes + edges + 2 x virtual nodes), to check or
refit `cost.ENGINE_FIT`. Nothing here is a pass/fail test.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import subprocess
import time
import warnings
from pathlib import Path
from tempfile import TemporaryDirectory

import torch
from torch import nn

from graphviz_app import render, save, trace_model
from graphviz_app.analysis.collapse import collapse
from graphviz_app.drawing.cost import load_factor, measure
from graphviz_app.drawing.layout import find_engine
from graphviz_app.model import Graph


class Tagger(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embedding = nn.Embedding(100, 16)
        self.lstm = nn.LSTM(16, 32, num_layers=2, batch_first=True)
        self.gru = nn.GRU(32, 32, batch_first=True)
        self.linear = nn.Linear(32, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, _ = self.lstm(self.embedding(x))
        h, _ = self.gru(h)
        return self.linear(h)


def tagger(steps: int) -> Graph:
    torch.manual_seed(0)
    return trace_model(Tagger(), torch.randint(0, 100, (2, steps)))


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(command: list[str], source: bytes, cap: float) -> tuple[float | None, float]:
    """Wall seconds (None past `cap`) and CPU seconds of one layout run."""
    t0, c0 = time.perf_counter(), children_cpu()
    try:
        subprocess.run(command, input=source, capture_output=True, timeout=cap, check=False)
    except subprocess.TimeoutExpired:
        return None, children_cpu() - c0
    return time.perf_counter() - t0, children_cpu() - c0


def command(engine: str) -> list[str]:
    exe = find_engine(engine)
    if exe is None:
        raise SystemExit(f"{engine} is not installed")
    return [exe, "-Tsvg"] if engine == "dot" else [exe, "-Kdot", "-Tsvg"]


def before_after(steps: int, cap: float, deadline: float) -> None:
    graph = tagger(steps)
    shown = collapse(graph, depth=2, roll=True)
    cost = measure(shown)
    print(f"\ntagger of {steps} steps: {len(graph.nodes)} nodes; drawn view: {cost}, work {cost.work:,}")
    print(f"load factor now: {load_factor():.1f}")
    source = render(graph, depth=2, roll=True).source.encode()
    wall, cpu = run(command("dot"), source, cap)
    shown_wall = f"{wall:.1f}" if wall is not None else f"> {cap:.0f} (stopped)"
    print(f"| before: dot, no deadline | {shown_wall} | {cpu:.1f} | the full view |")
    lines: list[str] = []
    with TemporaryDirectory() as tmp, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t0, c0 = time.perf_counter(), children_cpu()
        save(graph, Path(tmp) / "rnn.svg", depth=2, roll=True, timeout=deadline, progress=lines.append)
        wall, cpu = time.perf_counter() - t0, children_cpu() - c0
    what = "; ".join(str(w.message)[:90] + "..." for w in caught) or "the full view"
    print(f"| after: save(), {deadline:g} s deadline | {wall:.1f} | {cpu:.1f} | {what} |")
    for line in lines:
        print(f"    progress: {line}")


def fit(steps_list: list[int], cap: float) -> None:
    print("\n| steps | frames | nodes | edges | virtual | work | dot CPU s | graphviz-pure CPU s |")
    print("|---|---|---|---|---|---|---|---|")
    for steps in steps_list:
        graph = tagger(steps)
        shown = collapse(graph, depth=2, roll=True)
        for clusters in (True, False):
            cost = measure(shown, clusters=clusters)
            source = render(graph, depth=2, roll=True, clusters=clusters).source.encode()
            cells = []
            for engine in ("dot", "graphviz-pure"):
                wall, cpu = run(command(engine), source, cap)
                cells.append(f"{cpu:.2f}" if wall is not None else f"> {cpu:.0f} (stopped)")
            print(f"| {steps} | {'yes' if clusters else 'no'} | {cost.nodes:,} | {cost.edges:,} | {cost.virtual:,} "
                  f"| {cost.work:,} | {cells[0]} | {cells[1]} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--cap", type=float, default=120.0, help="seconds before a layout is stopped")
    parser.add_argument("--deadline", type=float, default=60.0, help="save()'s timeout for the after run")
    parser.add_argument("--fit", action="store_true", help="measure the cost model's data instead")
    parser.add_argument("--fit-steps", type=int, nargs="*", default=[5, 10, 15])
    args = parser.parse_args()
    print(f"# {time.strftime('%Y-%m-%d')}, {platform.node()}, {os.cpu_count()} cores, "
          f"load {os.getloadavg()[0]:.1f}, torch {torch.__version__}")
    if args.fit:
        fit(args.fit_steps, args.cap)
    else:
        print("\n| run | wall s | layout CPU s | drawn |\n|---|---|---|---|")
        before_after(args.steps, args.cap, args.deadline)


if __name__ == "__main__":
    main()
