"""Cost of nn modules in the expression language: a program against the same torch code.

Run: .venv/bin/python benchmarks/bench_nnexpr.py [--repeat 7]

For the gallery's 6-layer transformer encoder and CNN, each run alternates:
- ours: `expr.evaluate(program, isolated=False)` (parse, build every module on meta and count it, build it for
  real, size every call on meta, run under `record` with program lines), then
  `trace(ev.output, ev.params, names=ev.variables)`;
- peer: the same modules built and called as plain torch code under `record(root)`, then
  `trace(out, root)`: what a script with `trace_model` pays.
Reports the best CPU time of each and the ratio (`benchmarks/timing.py`). Nothing here is a pass/fail test.
"""

from __future__ import annotations

import argparse
import os
import warnings
from collections.abc import Callable
from typing import Any

import torch
from timing import taking_turns
from torch import nn

from graphviz_app import record, trace
from graphviz_app.expr import evaluate
from graphviz_app.web.gallery import example


def _transformer() -> Any:
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
    enc = nn.TransformerEncoder(layer, 6)
    root = nn.ModuleDict({"layer": layer, "enc": enc})
    x = torch.randn(2, 5, 32, requires_grad=True)
    with record(root):
        out = (enc(x) * torch.ones(32, requires_grad=True)).sum()
    return trace(out, root)


def _cnn() -> Any:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                        nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
    head = nn.Linear(8, 10)
    root = nn.ModuleDict({"net": net, "head": head})
    x = torch.randn(2, 3, 16, 16)
    with record(root):
        out = (head(net(x).mean((2, 3))) * torch.ones(10, requires_grad=True)).sum()
    return trace(out, root)


def _ours(key: str) -> Callable[[], Any]:
    program = example(key).program

    def run() -> Any:
        ev = evaluate(program, isolated=False)  # the language's cost here, not a worker's first run
        return trace(ev.output, ev.params, names=ev.variables)

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    print(f"torch {torch.__version__}, 1 thread, load average {os.getloadavg()[0]:.1f}, best of {args.repeat}")
    for key, peer in (("transformer", _transformer), ("cnn", _cnn)):
        ours, theirs = _ours(key), peer
        ours(), theirs()  # warm up
        times = taking_turns({"ours": ours, "theirs": theirs}, args.repeat)  # so load changes hit both
        a, b = times["ours"], times["theirs"]
        print(f"{key:12s} program {min(a) * 1e3:7.1f} ms   plain torch + record {min(b) * 1e3:7.1f} ms   "
              f"ratio {min(a) / min(b):.2f}x")


if __name__ == "__main__":
    main()
