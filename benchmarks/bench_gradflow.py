"""trace(gradients=True) against plain trace + one backward(), and against detect_anomaly().

Run: .venv/bin/python benchmarks/bench_gradflow.py [--repeat 5] [--threads 1]

For an MLP and a transformer encoder block, in one process, alternating order,
best of `--repeat` (the forward pass is rebuilt before each run and not timed):
- plain:    trace(y, params) then y.backward()            (what a user runs today)
- ours:     trace(y, params, gradients=True)              (goal: at most 2x plain)
- backward: y.backward() alone
- anomaly:  y.backward() under torch.autograd.detect_anomaly(), forward made under it too
Ratios: ours / plain, and ours / anomaly backward. Times are this process's CPU time
(`time.process_time`, one torch thread): on a shared, loaded machine wall time mostly
measures the neighbours. Nothing here is a pass/fail test.
"""

from __future__ import annotations

import argparse
import os
import platform
import warnings
from collections.abc import Callable
from typing import Any

import torch
from timing import cpu_seconds

from graphviz_app import trace

Build = Callable[[], tuple[torch.Tensor, dict[str, torch.Tensor]]]


def mlp_case() -> Build:
    torch.manual_seed(0)
    layers: list[torch.nn.Module] = []
    for _ in range(8):
        layers += [torch.nn.Linear(512, 512), torch.nn.GELU()]
    net = torch.nn.Sequential(*layers, torch.nn.Linear(512, 10))
    x = torch.randn(256, 512)
    target = torch.randint(0, 10, (256,))
    return lambda: (torch.nn.functional.cross_entropy(net(x), target), dict(net.named_parameters()))


def transformer_case() -> Build:
    torch.manual_seed(0)
    block = torch.nn.TransformerEncoderLayer(256, 8, 1024, dropout=0.0, batch_first=True)
    x = torch.randn(16, 128, 256)
    return lambda: (block(x).pow(2).mean(), dict(block.named_parameters()))


def _clear(params: dict[str, torch.Tensor]) -> None:
    for p in params.values():
        p.grad = None


def _time(build: Build, run: Callable[[torch.Tensor, dict[str, torch.Tensor]], Any], *, anomaly: bool = False) -> float:
    if anomaly:
        with warnings.catch_warnings():
            # detect_anomaly() warns "Anomaly Detection has been enabled" when it is made.
            warnings.simplefilter("ignore")
            with torch.autograd.detect_anomaly():
                y, params = build()
                elapsed, _ = cpu_seconds(lambda: run(y, params))
    else:
        y, params = build()
        elapsed, _ = cpu_seconds(lambda: run(y, params))
    _clear(params)
    return elapsed


def _plain(y: torch.Tensor, params: dict[str, torch.Tensor]) -> None:
    trace(y, params)
    y.backward()


def _ours(y: torch.Tensor, params: dict[str, torch.Tensor]) -> None:
    trace(y, params, gradients=True)


def _backward(y: torch.Tensor, params: dict[str, torch.Tensor]) -> None:
    y.backward()


def measure(name: str, build: Build, repeat: int) -> dict[str, float]:
    best = {k: float("inf") for k in ("plain", "ours", "backward", "anomaly")}
    for i in range(repeat):
        order = [("plain", _plain, False), ("ours", _ours, False), ("backward", _backward, False),
                 ("anomaly", _backward, True)]
        if i % 2:
            order.reverse()
        for key, fn, anomaly in order:
            best[key] = min(best[key], _time(build, fn, anomaly=anomaly))
    y, _ = build()
    nodes = len(trace(y).nodes)
    print(f"{name:12} {nodes:6d} nodes  plain {best['plain'] * 1e3:8.1f} ms  ours {best['ours'] * 1e3:8.1f} ms"
          f"  ratio {best['ours'] / best['plain']:5.2f}x  |  backward {best['backward'] * 1e3:7.1f} ms"
          f"  anomaly backward {best['anomaly'] * 1e3:7.1f} ms  ours/anomaly {best['ours'] / best['anomaly']:5.2f}x")
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1: the machine is shared)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, Python {platform.python_version()}, {os.cpu_count()} cores, "
          f"{args.threads} torch thread(s), best of {args.repeat}")
    measure("MLP 8x512", mlp_case(), args.repeat)
    measure("transformer", transformer_case(), args.repeat)


if __name__ == "__main__":
    main()
