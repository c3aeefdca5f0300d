"""The checker's screen at 200,000 inputs beside torch's fast gradcheck, and a wrong backward at that size.

Run: .venv/bin/python benchmarks/bench_screen_scale.py [--n 200000]

For each function (correct gradients, large outputs or large values: the probes' rounding grows
with them) one run of `gradcheck.check` (default options: screened, with a second step and a
sample when the probes miss) and one of `torch.autograd.gradcheck(..., fast_mode=True)` (the
peer: one random projection, raise_exception=False), both on the same float64 input, CPU seconds
(`time.process_time`) and both verdicts. Then a backward 1% wrong: our verdict and its blame, and
torch's fast mode on it in a child process stopped after `PEER_LIMIT_S` (on a failure it computes the
whole Jacobian for its message).
Not a test.
"""

from __future__ import annotations

import argparse
import multiprocessing
import time
from collections.abc import Callable

import torch
from timing import cpu_seconds

from gradcheck import check


class _WrongSquare(torch.autograd.Function):
    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return (x * x).sum() * 1000

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, g: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors  # type: ignore[attr-defined]
        return g * 2000 * x * 1.01


FUNCTIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "1000 * sum(x^2)": lambda x: (x * x).sum() * 1000,
    "100 * exp(x)": lambda x: x.exp() * 100,
    "cumsum(x)": lambda x: x.cumsum(0),
    "sum(sin(x)^2) * cos(x)": lambda x: (x.sin() ** 2).sum() * x.cos(),
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=200_000)
    n = parser.parse_args().n
    print(f"n = {n:,} float64 inputs; CPU seconds")
    print("| function | ours s | ours | torch fast s | torch fast | ratio torch/ours |")
    print("|---|---|---|---|---|---|")
    for name, fn in FUNCTIONS.items():
        torch.manual_seed(0)
        x = torch.randn(n, dtype=torch.float64, requires_grad=True)
        ours_s, report = cpu_seconds(lambda: check(fn, x))  # noqa: B023 - called at once
        peer_s, peer = cpu_seconds(lambda: torch.autograd.gradcheck(fn, (x,), fast_mode=True,  # noqa: B023
                                                             raise_exception=False))
        ours = ("pass" if report.passed else "FAIL") + f" ({report.mode})"  # type: ignore[attr-defined]
        print(f"| {name} | {ours_s:.2f} | {ours} | {peer_s:.2f} | {'pass' if peer else 'FAIL'} | "
              f"{peer_s / ours_s:.2f} |")
    torch.manual_seed(0)
    x = torch.randn(n, dtype=torch.float64, requires_grad=True)
    wrong_s, report = cpu_seconds(lambda: check(_WrongSquare.apply, x))
    verdict = f"{'pass' if report.passed else 'FAIL'} (blame {report.pairs[0].blame})"  # type: ignore[attr-defined]
    # torch's fast mode, on a failure, computes the whole Jacobian for its message: run it apart, bounded.
    peer = multiprocessing.get_context("fork").Process(target=_torch_fast_on_wrong, args=(n,))
    start = time.monotonic()
    peer.start()
    peer.join(PEER_LIMIT_S)
    if peer.is_alive():
        peer.kill()
        peer.join()
        peer_text = f"did not finish in {PEER_LIMIT_S:g} s (wall) | -"
    else:
        peer_text = f"{time.monotonic() - start:.2f} (wall) | exit {peer.exitcode}"
    print(f"| backward 1% wrong | {wrong_s:.2f} | {verdict} | {peer_text} | - |")


PEER_LIMIT_S = 120.0


def _torch_fast_on_wrong(n: int) -> None:
    torch.manual_seed(0)
    x = torch.randn(n, dtype=torch.float64, requires_grad=True)
    torch.autograd.gradcheck(_WrongSquare.apply, (x,), fast_mode=True, raise_exception=False)

if __name__ == "__main__":
    main()
