"""Cost of record(): forward under record() against a plain forward, and trace with module information against without.

Run: .venv/bin/python benchmarks/bench_record.py [--repeat 15] [--threads 1]
     .venv/bin/python benchmarks/bench_record.py --profile   # cProfile of a recorded forward

1. Forward: a ResNet-style CNN (conv/batchnorm/relu residual blocks) and a
   6-layer `nn.TransformerEncoder`, each run `model(x).sum()` plainly and
   inside `with record(model):`, alternating which goes first. Goal: <= 1.5x.
2. Trace: the same models' graphs traced as before this feature,
   `trace(out, dict(model.named_parameters()))` on a plain forward, and with
   module information, `trace(out, model)` on a recorded forward (tags read,
   leaves placed in modules, `Graph.modules` built). Goal: <= 1.2x.

Both sides run in the same process, alternating, `--repeat` times: the best
wall time and the median CPU time of this thread (torch runs one thread, so
that is all the work, and it is what other processes on a shared machine
disturb least) are compared. Nothing here is a pass/fail test.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import platform
import pstats
import statistics
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import torch
from torch import nn

from graphviz_app import record, trace


class _Residual(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(x + self.bn2(self.conv2(h)))


def resnet_style(blocks: int = 8, channels: int = 32) -> tuple[nn.Module, torch.Tensor]:
    """A small ResNet: stem, `blocks` residual blocks, pooling and a linear head."""
    model = nn.Sequential(
        nn.Conv2d(3, channels, 3, padding=1),
        *[_Residual(channels) for _ in range(blocks)],
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(channels, 10),
    )
    return model, torch.randn(8, 3, 32, 32)


def transformer(layers: int = 6, width: int = 128) -> tuple[nn.Module, torch.Tensor]:
    """A `layers`-deep encoder over a batch of 8 sequences of 32 tokens."""
    layer = nn.TransformerEncoderLayer(width, 4, 2 * width, batch_first=True)
    return nn.TransformerEncoder(layer, layers, enable_nested_tensor=False), torch.randn(8, 32, width)


MODELS: dict[str, Callable[[], tuple[nn.Module, torch.Tensor]]] = {
    "ResNet-style (8 blocks, 32 ch, 8x3x32x32)": resnet_style,
    "TransformerEncoder (6 layers, d=128, 8x32 tokens)": transformer,
}

# Not a goal: tiny tensors, where the per-call Python cost of record() shows undiluted.
TINY: dict[str, Callable[[], tuple[nn.Module, torch.Tensor]]] = {
    "tiny TransformerEncoder (6 layers, d=16, 1x4 tokens)": lambda: (
        transformer(6, 16)[0],
        torch.randn(1, 4, 16),
    ),
}


Times = tuple[list[float], list[float]]  # wall seconds, this thread's CPU seconds


def _paired(a: Callable[[], Any], b: Callable[[], Any], repeat: int) -> tuple[Times, Times]:
    """Times of `a` and `b`, run alternately (a first on even rounds), after one warm-up each.

    With one torch thread all the work runs on this thread, so its CPU time
    is the figure least disturbed by other processes on a shared machine.
    """
    a(), b()
    times_a: Times = ([], [])
    times_b: Times = ([], [])
    for i in range(repeat):
        order = [(a, times_a), (b, times_b)] if i % 2 == 0 else [(b, times_b), (a, times_a)]
        for fn, (wall, cpu) in order:
            start, start_cpu = time.perf_counter(), time.thread_time()
            fn()
            cpu.append(time.thread_time() - start_cpu)
            wall.append(time.perf_counter() - start)
    return times_a, times_b


def _row(label: str, base: Times, ours: Times) -> str:
    wall_base, wall_ours = min(base[0]), min(ours[0])
    cpu_base, cpu_ours = statistics.median(base[1]), statistics.median(ours[1])
    return (
        f"| {label} | {wall_base * 1e3:.1f} | {wall_ours * 1e3:.1f} | {wall_ours / wall_base:.2f}x "
        f"| {cpu_base * 1e3:.1f} | {cpu_ours * 1e3:.1f} | {cpu_ours / cpu_base:.2f}x |"
    )


def bench_forward(repeat: int) -> None:
    print("\nForward: plain against under record(model) (ms; goal <= 1.5x)")
    print("| model | plain best wall | record best wall | ratio | plain median CPU | record median CPU | ratio |")
    print("|---|---|---|---|---|---|---|")
    for label, make in {**MODELS, **TINY}.items():
        torch.manual_seed(0)
        model, x = make()

        def plain(model: nn.Module = model, x: torch.Tensor = x) -> None:
            model(x).sum()

        def recorded(model: nn.Module = model, x: torch.Tensor = x) -> None:
            with record(model):
                model(x).sum()

        base, ours = _paired(plain, recorded, repeat)
        print(_row(label, base, ours), flush=True)


def bench_trace(repeat: int) -> None:
    print("\nTrace: without module information against with it (ms; goal <= 1.2x)")
    print("| model | nodes | without best wall | with best wall | ratio "
          "| without median CPU | with median CPU | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for label, make in MODELS.items():
        torch.manual_seed(0)
        model, x = make()
        plain_out = model(x).sum()
        with record(model):
            recorded_out = model(x).sum()
        params = dict(model.named_parameters())
        nodes = len(trace(recorded_out, model).nodes)
        base, ours = _paired(partial(trace, plain_out, params), partial(trace, recorded_out, model), repeat)
        row = _row(label, base, ours)
        print(row.replace(f"| {label} |", f"| {label} | {nodes} |", 1), flush=True)


def profile() -> None:
    model, x = resnet_style()
    with record(model):
        model(x)
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(5):
        with record(model):
            model(x).sum()
    profiler.disable()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(15)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (1: steadier)")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.profile:
        profile()
        return
    print(
        f"Python {platform.python_version()}, torch {torch.__version__}, {os.cpu_count()} CPUs, "
        f"torch threads {torch.get_num_threads()}, load average {os.getloadavg()[0]:.1f}"
    )
    bench_forward(args.repeat)
    bench_trace(args.repeat)


if __name__ == "__main__":
    main()
