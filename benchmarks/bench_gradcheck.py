"""gradcheck.check side by side with torch.autograd.gradcheck, in one process: a table of ratios.

Run: .venv/bin/python benchmarks/bench_gradcheck.py [--sizes 100 1000 3000] [--repeat 3]

For each function and input size n (float64) it times, in this order and in the
same process: our full check, torch's gradcheck(fast_mode=False), our fast check
and torch's gradcheck(fast_mode=True); it prints each verdict and the speed-up
ratios. Timings are the best of `--repeat` rounds in which the four calls take
turns (a call is not repeated once a run took more than 20 s). Then, unless --no-memory, it measures the peak
resident memory our full check adds, each case in a fresh process (Linux: VmHWM reset through
/proc/self/clear_refs after set-up), next to the chunk budget and the size of
the two Jacobians a full check must hold. Nothing here is a pass/fail test.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import torch

from gradcheck import check

D = torch.float64
MIB = 2**20


@dataclass(frozen=True, slots=True)
class Row:
    """One (function, n) measurement."""

    function: str
    n: int
    ours_s: float
    torch_s: float
    ours_fast_s: float
    torch_fast_s: float
    ours_passed: bool
    torch_passed: bool
    ours_fast_passed: bool
    torch_fast_passed: bool
    chunk_size: int
    chunk_mib: float
    budget_mib: float

    @property
    def speedup(self) -> float:
        return self.torch_s / self.ours_s

    @property
    def fast_speedup(self) -> float:
        return self.torch_fast_s / self.ours_fast_s


def make_functions(n: int) -> dict[str, tuple[Callable[..., torch.Tensor], torch.Tensor]]:
    """The three functions of the issue, with fixed weights, at input size n."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(n, generator=gen, dtype=D).requires_grad_()
    w = torch.randn(n, n, generator=gen, dtype=D) / n**0.5
    w1 = torch.randn(64, n, generator=gen, dtype=D) / n**0.5
    w2 = torch.randn(16, 64, generator=gen, dtype=D) / 8.0
    b1 = torch.randn(64, generator=gen, dtype=D)

    def mlp(x: torch.Tensor) -> torch.Tensor:
        return w2 @ torch.tanh(w1 @ x + b1)

    return {
        "elementwise sin(x)*x^2": (lambda x: torch.sin(x) * x**2, x),
        "tanh(W @ x)": (lambda x: torch.tanh(w @ x), x),
        "MLP n-64-16 (tanh)": (mlp, x),
    }


def _rss_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def peak_mib(call: Callable[[], Any]) -> float:
    """Peak resident memory the call added above what the process held before it."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM (the peak) to the current resident size
    except OSError:
        return float("nan")
    before = _rss_kib("VmRSS")
    call()
    return (_rss_kib("VmHWM") - before) / 1024


def interleaved(calls: dict[str, Callable[[], Any]], repeat: int) -> dict[str, tuple[float, Any]]:
    """Best wall time and result of each call over `repeat` rounds, the calls taking turns.

    Taking turns spreads the load other processes put on a shared machine over all
    calls alike; a call whose first run took over 20 s is not run again.
    """
    best: dict[str, tuple[float, Any]] = {}
    for _ in range(repeat):
        for name, call in calls.items():
            if name in best and best[name][0] > 20:
                continue
            start = time.perf_counter()
            result = call()
            elapsed = time.perf_counter() - start
            if name not in best or elapsed < best[name][0]:
                best[name] = (elapsed, result)
    return best


def torch_check(fn: Callable[..., Any], x: torch.Tensor, fast: bool) -> bool:
    return bool(torch.autograd.gradcheck(fn, (x,), raise_exception=False, fast_mode=fast))


def measure(name: str, fn: Callable[..., Any], x: torch.Tensor, repeat: int) -> Row:
    best = interleaved(
        {
            "ours": lambda: check(fn, x),
            "torch": lambda: torch_check(fn, x, False),
            "ours fast": lambda: check(fn, x, fast=True),
            "torch fast": lambda: torch_check(fn, x, True),
        },
        repeat,
    )
    (ours_s, report), (torch_s, theirs) = best["ours"], best["torch"]
    (ours_fast_s, fast_report), (torch_fast_s, theirs_fast) = best["ours fast"], best["torch fast"]
    return Row(
        function=name,
        n=x.numel(),
        ours_s=ours_s,
        torch_s=torch_s,
        ours_fast_s=ours_fast_s,
        torch_fast_s=torch_fast_s,
        ours_passed=report.passed,
        torch_passed=theirs,
        ours_fast_passed=fast_report.passed,
        torch_fast_passed=theirs_fast,
        chunk_size=report.memory.chunk_size,
        chunk_mib=report.memory.chunk_bytes / MIB,
        budget_mib=report.memory.budget_bytes / MIB,
    )


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return (
        f"{cpu}, {os.cpu_count()} cores, torch {torch.__version__} ({torch.get_num_threads()} threads), "
        f"Python {platform.python_version()}, {platform.system()}"
    )


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f}"


def _verdicts(*passed: bool) -> str:
    return "/".join("pass" if p else "FAIL" for p in passed)


def table(rows: list[Row]) -> str:
    header = (
        "| function | n | ours ms | torch ms | speed-up | ours fast ms | torch fast ms | fast speed-up "
        "| verdicts (ours/torch/ours fast/torch fast) | chunk: elements, MiB est. of budget |"
    )
    lines = [header, "|" + "---|" * (header.count("|") - 1)]
    for r in rows:
        lines.append(
            f"| {r.function} | {r.n} | {_ms(r.ours_s)} | {_ms(r.torch_s)} | {r.speedup:.1f}x "
            f"| {_ms(r.ours_fast_s)} | {_ms(r.torch_fast_s)} | {r.fast_speedup:.1f}x "
            f"| {_verdicts(r.ours_passed, r.torch_passed, r.ours_fast_passed, r.torch_fast_passed)} "
            f"| {r.chunk_size}, {r.chunk_mib:.1f} of {r.budget_mib:.0f} |"
        )
    return "\n".join(lines)


def peak_in_fresh_process(name: str, n: int) -> dict[str, float]:
    """Runs `--peak-case` in a new interpreter, so earlier runs' cached memory cannot hide the peak."""
    out = subprocess.run(
        [sys.executable, __file__, "--peak-case", name, str(n)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.splitlines()[-1])


def peak_case(name: str, n: int) -> None:
    """Prints, as JSON, the peak memory one full check of (name, n) adds after set-up."""
    fn, x = make_functions(n)[name]
    check(*make_functions(8)[name])  # one-off set-up costs, at a tiny size
    out = fn(x)
    report_holder: list[Any] = []
    peak = peak_mib(lambda: report_holder.append(check(fn, x)))
    report = report_holder[0]
    print(
        json.dumps(
            {
                "peak_mib": peak,
                "budget_mib": report.memory.budget_bytes / MIB,
                "jacobians_mib": 2 * out.numel() * x.numel() * 8 / MIB,
            }
        )
    )


def memory_table(names: list[str], sizes: list[int]) -> str:
    lines = [
        "| function | n | peak MiB (fresh process) | chunk budget MiB | two Jacobians MiB | peak - Jacobians |",
        "|---|---|---|---|---|---|",
    ]
    for n in sizes:
        for name in names:
            m = peak_in_fresh_process(name, n)
            lines.append(
                f"| {name} | {n} | {m['peak_mib']:.1f} | {m['budget_mib']:.0f} | {m['jacobians_mib']:.1f} "
                f"| {m['peak_mib'] - m['jacobians_mib']:.1f} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 3000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--threads", type=int, help="torch.set_num_threads for both sides (default: torch's)"
    )
    parser.add_argument("--json", help="also write the rows to this JSON file")
    parser.add_argument(
        "--no-memory", action="store_true", help="skip the fresh-process memory table"
    )
    parser.add_argument("--peak-case", nargs=2, metavar=("NAME", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.peak_case:
        peak_case(args.peak_case[0], int(args.peak_case[1]))
        return 0

    warm_fn, warm_x = make_functions(8)["tanh(W @ x)"]
    for fast in (False, True):  # first calls pay one-off set-up costs
        check(warm_fn, warm_x, fast=fast)
        torch_check(warm_fn, warm_x, fast)
    print(f"machine: {machine()}")
    rows = []
    for n in args.sizes:
        for name, (fn, x) in make_functions(n).items():
            rows.append(measure(name, fn, x, args.repeat))
            print(f"  done: {name}, n={n}", flush=True)
    print(table(rows))
    if not args.no_memory:
        print(memory_table(list(make_functions(8)), args.sizes))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine(), "rows": [asdict(r) for r in rows]}, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
