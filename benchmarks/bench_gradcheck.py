"""gradcheck.check before and after, beside torch.autograd.gradcheck, in one process: CPU time.

Run: .venv/bin/python benchmarks/bench_gradcheck.py [--n 1000] [--repeat 5] [--before REV]

For each function of n float64 input elements it measures, with one torch thread
(`torch.set_num_threads(1)`) and CPU time (`time.process_time`):

- torch: torch.autograd.gradcheck(fast_mode=False), the full check the goal is set against;
- torch fast: torch.autograd.gradcheck(fast_mode=True), one random projection, for reference;
- before: the `gradcheck` package at git revision REV (loaded from `git archive` under
  another name, so it runs in the same process), called with its defaults;
- after: this checkout's `gradcheck.check` with its defaults (large Jacobians screened first);
- every element: this checkout's `gradcheck.check(..., screen=False)`.

The calls take turns, best of `--repeat`; a speed-up is torch's full time over the other's.
One function has a wrong backward, to show what a failing check costs. It prints one table
and the geometric means. Nothing here is a pass/fail test.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import math
import os
import platform
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from gradcheck import check

ROOT = Path(__file__).resolve().parents[1]
START = "829045a"  # main before the screen: every element compared, the "before" code
D = torch.float64


@dataclass(frozen=True, slots=True)
class Row:
    """One function's best CPU seconds per checker, each checker's verdict, and how `after` checked."""

    function: str
    n: int
    seconds: dict[str, float]
    passed: dict[str, bool]
    mode: str

    def speedup(self, who: str) -> float:
        return self.seconds["torch"] / self.seconds[who]


class _OldStyleSwish(torch.autograd.Function):
    """x * sigmoid(x) as an old-style Function (forward takes ctx): vmap cannot take it."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        s = torch.sigmoid(x)
        ctx.save_for_backward(x, s)
        return x * s

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        x, s = ctx.saved_tensors
        return grad * (s + x * s * (1 - s))


class _WrongSwish(_OldStyleSwish):
    """The same with a backward that forgets the product rule's second term: every check fails."""

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        x, s = ctx.saved_tensors
        return grad * s


def make_functions(n: int) -> dict[str, tuple[Callable[..., torch.Tensor], torch.Tensor]]:
    """Layer-shaped functions (tanh(Wx), softmax, layernorm, cumsum, attention, an MLP) and an old-style Function."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(n, generator=gen, dtype=D)
    w = torch.randn(n, n, generator=gen, dtype=D) / n**0.5
    w1 = torch.randn(64, n, generator=gen, dtype=D) / n**0.5
    w2 = torch.randn(16, 64, generator=gen, dtype=D) / 8.0
    b1 = torch.randn(64, generator=gen, dtype=D)
    gamma = 1 + 0.1 * torch.randn(n, generator=gen, dtype=D)
    beta = 0.1 * torch.randn(n, generator=gen, dtype=D)
    d = 20
    seq = max(1, n // d)
    wq, wk, wv = (torch.randn(d, d, generator=gen, dtype=D) / d**0.5 for _ in range(3))
    tokens = torch.randn(seq, d, generator=gen, dtype=D)

    def attention(t: torch.Tensor) -> torch.Tensor:
        q, k, v = t @ wq, t @ wk, t @ wv
        return torch.softmax(q @ k.T / d**0.5, dim=-1) @ v

    def mlp(x: torch.Tensor) -> torch.Tensor:
        return w2 @ torch.tanh(w1 @ x + b1)

    def old_style(x: torch.Tensor) -> torch.Tensor:
        return _OldStyleSwish.apply(x)

    def wrong(x: torch.Tensor) -> torch.Tensor:
        return _WrongSwish.apply(x)

    def grad(t: torch.Tensor) -> torch.Tensor:
        return t.clone().requires_grad_()

    return {
        "tanh(W @ x)": (lambda x: torch.tanh(w @ x), grad(x)),
        "softmax": (lambda x: torch.softmax(x, dim=0), grad(x)),
        "layernorm": (lambda x: torch.nn.functional.layer_norm(x, (n,), gamma, beta), grad(x)),
        "cumsum": (lambda x: torch.cumsum(x, dim=0), grad(x)),
        f"attention ({seq}x{d} tokens)": (attention, grad(tokens)),
        "MLP n-64-16 (tanh)": (mlp, grad(x)),
        "old-style Function (swish)": (old_style, grad(x)),
        "old-style Function, wrong backward (fails)": (wrong, grad(x)),
    }


def load_before(rev: str) -> ModuleType:
    """The `gradcheck` package as it was at `rev`, imported as `gradcheck_before`."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "gradcheck"], capture_output=True, check=True
    ).stdout
    where = Path(tempfile.mkdtemp(prefix="gradcheck_before_"))
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(where, filter="data")
    package = where / "gradcheck"
    # Its own modules import each other as `gradcheck.<module>`, which would load this
    # checkout's: point them at the old package instead.
    for source in package.rglob("*.py"):
        text = source.read_text()
        text = re.sub(r"\b(from|import) gradcheck(?=[. ])", r"\1 gradcheck_before", text)
        source.write_text(text)
    spec = importlib.util.spec_from_file_location(
        "gradcheck_before", package / "__init__.py", submodule_search_locations=[str(package)]
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gradcheck_before"] = module
    spec.loader.exec_module(module)
    return module


def best_cpu(calls: dict[str, Callable[[], bool]], repeat: int) -> tuple[dict[str, float], dict[str, bool]]:
    """Best CPU time and the verdict of each call over `repeat` rounds, the calls taking turns."""
    seconds: dict[str, float] = {}
    passed: dict[str, bool] = {}
    for _ in range(repeat):
        for name, call in calls.items():
            if seconds.get(name, 0.0) > 20:  # one slow run is enough
                continue
            start = time.process_time()
            passed[name] = call()
            elapsed = time.process_time() - start
            seconds[name] = min(seconds.get(name, math.inf), elapsed)
    return seconds, passed


CHECKERS = ("torch", "torch fast", "before", "after", "every element")


def measure(name: str, fn: Callable[..., Any], x: torch.Tensor, before: ModuleType, repeat: int) -> Row:
    modes: list[str] = []

    def after() -> bool:
        report = check(fn, x)
        modes.append(report.mode)
        return bool(report.passed)

    calls = {
        "torch": lambda: bool(torch.autograd.gradcheck(fn, (x,), raise_exception=False, fast_mode=False)),
        "torch fast": lambda: bool(torch.autograd.gradcheck(fn, (x,), raise_exception=False, fast_mode=True)),
        "before": lambda: bool(before.check(fn, x).passed),
        "after": after,
        "every element": lambda: bool(check(fn, x, screen=False).passed),
    }
    seconds, passed = best_cpu(calls, repeat)
    return Row(name, x.numel(), seconds, passed, modes[-1])


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    load = f", load average {os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else ""
    return (
        f"{cpu}, {os.cpu_count()} cores{load}, torch {torch.__version__} "
        f"({torch.get_num_threads()} thread(s)), Python {platform.python_version()}, {platform.system()}"
    )


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def table(rows: list[Row], rev: str) -> str:
    names = {"before": f"before ({rev})"}
    header = (
        "| function | n | "
        + " | ".join(f"{names.get(k, k)} ms" for k in CHECKERS)
        + " | speed-up: "
        + " | ".join(names.get(k, k) for k in CHECKERS[1:])
        + " | after's mode | verdicts ("
        + "/".join(CHECKERS)
        + ") |"
    )
    lines = [header, "|" + "---|" * (header.count("|") - 1)]
    for r in rows:
        times = " | ".join(f"{r.seconds[k] * 1e3:.1f}" for k in CHECKERS)
        speed = " | ".join(f"{r.speedup(k):.1f}x" for k in CHECKERS[1:])
        verdicts = "/".join("pass" if r.passed[k] else "FAIL" for k in CHECKERS)
        lines.append(f"| {r.function} | {r.n} | {times} | {speed} | {r.mode} | {verdicts} |")
    layer = [r for r in rows if not r.function.startswith("old-style")]
    if layer:
        means = " | ".join(f"{geomean([r.speedup(k) for r in layer]):.1f}x" for k in CHECKERS[1:])
        lines.append(
            f"| geometric mean, layer-shaped (all but the old-style Functions) | |{' |' * len(CHECKERS)} {means} | | |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--n", type=int, default=1000, help="input elements per function (default 1000)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    parser.add_argument("--before", default=START, help=f"git revision of the 'before' code (default {START})")
    parser.add_argument("--only", nargs="*", help="run only the functions whose names start with these")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    before = load_before(args.before)
    warm_fn, warm_x = make_functions(8)["tanh(W @ x)"]
    for checker in (before.check, check):  # first calls pay one-off set-up costs
        checker(warm_fn, warm_x)
    check(warm_fn, warm_x, screen=True)
    torch.autograd.gradcheck(warm_fn, (warm_x,))
    torch.autograd.gradcheck(warm_fn, (warm_x,), fast_mode=True)
    print(f"machine: {machine()}")
    rows = []
    for name, (fn, x) in make_functions(args.n).items():
        if args.only and not any(name.startswith(p) for p in args.only):
            continue
        rows.append(measure(name, fn, x, before, args.repeat))
        print(f"  done: {name}", flush=True)
    print(f"machine at the end: {machine()}")
    print(table(rows, args.before))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
