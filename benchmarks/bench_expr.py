"""The expression language: how long parse + validate + evaluate and the isolated round trip take.

Run: .venv/bin/python benchmarks/bench_expr.py [--repeat 300] [--trips 200]

1. The seeds' program (`x = torch.arange(3., requires_grad=True)` then
   `((x+2)**2+3).mean()`): `validate` alone, then parse + validate + evaluate
   in-process, against the same two lines written directly in Python with
   torch (the peer). Medians of `--repeat` runs after a warm-up.
2. The seeds' loss accumulated in a 1,000-iteration loop (5,000 tensor ops):
   evaluate against the same loop in Python, per op.
3. The isolated worker's round trip, once the pool is warm: `evaluate_job` of
   the seed program through `IsolatedRunner.run`, against in-process evaluate.

Goals from the issue: under 5 ms in-process and under 100 ms per round trip
(medians). Nothing here is a pass/fail test.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable

import torch

from graphviz_app.expr import evaluate, validate
from graphviz_app.expr.jobs import evaluate_job
from graphviz_app.expr.rehearsal import PRELOAD
from graphviz_app.runner import IsolatedRunner

SEED = "x = torch.arange(3., requires_grad=True)\n((x+2)**2+3).mean()"
LOOP = (
    "x = torch.arange(3., requires_grad=True)\ntotal = torch.zeros(())\n"
    "for i in range(1000):\n    total = total + ((x+2)**2+3).mean()\ntotal"
)


def _direct_seed() -> torch.Tensor:
    x = torch.arange(3.0, requires_grad=True)
    return ((x + 2) ** 2 + 3).mean()


def _direct_loop() -> torch.Tensor:
    x = torch.arange(3.0, requires_grad=True)
    total = torch.zeros(())
    for _ in range(1000):
        total = total + ((x + 2) ** 2 + 3).mean()
    return total


def _median_ms(fn: Callable[[], object], repeat: int) -> float:
    for _ in range(3):
        fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=300)
    parser.add_argument("--trips", type=int, default=200)
    args = parser.parse_args()
    print(f"python {platform.python_version()}, torch {torch.__version__}, {os.cpu_count()} cpus, "
          f"load {os.getloadavg()[0]:.1f}")

    rows = [
        ("validate(seed)", _median_ms(lambda: validate(SEED), args.repeat), None),
        ("evaluate(seed): parse+validate+run", _median_ms(lambda: evaluate(SEED), args.repeat), "seed"),
        ("seed written in Python (peer)", _median_ms(_direct_seed, args.repeat), None),
        ("evaluate(1000-iteration loop)", _median_ms(lambda: evaluate(LOOP), max(5, args.repeat // 30)), "loop"),
        ("loop written in Python (peer)", _median_ms(_direct_loop, max(5, args.repeat // 30)), None),
    ]
    with IsolatedRunner(workers=1, max_workers=1, preload=PRELOAD) as runner:
        runner.warm_up()
        rows.append(("worker round trip: evaluate_job(seed)",
                     _median_ms(lambda: runner.run(evaluate_job, SEED), args.trips), "trip"))

    by_name = {key: ms for _, ms, key in rows if key}
    print(f"\n{'what':42} {'median ms':>10}")
    for name, ms, _ in rows:
        print(f"{name:42} {ms:10.3f}")
    print(f"\nevaluate / Python, seed:            {by_name['seed'] / rows[2][1]:6.1f}x")
    print(f"evaluate / Python, loop:            {by_name['loop'] / rows[4][1]:6.1f}x "
          f"({by_name['loop'] / 5000 * 1e3:.1f} us per tensor op)")
    print(f"round trip / in-process evaluate:   {by_name['trip'] / by_name['seed']:6.1f}x")


if __name__ == "__main__":
    main()
