"""Judging one pair: compare, and when it fails, probe finite differences at more step sizes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch

from gradcheck._compare import PairData, Probe, compare_pair
from gradcheck.probes import KINK_COLUMNS, probe_columns, probe_steps
from gradcheck.report import Blame, PairReport

__all__ = ["Differences", "judge", "judge_direction"]


@dataclass(frozen=True, slots=True)
class Differences:
    """How a pair's finite differences were made, to evaluate fn again near the same point.

    `base[k]` is fn's output `checked[k]` at `args`, `floors[k]` its rounding floor.
    """

    fn: Callable[..., Any]
    args: Sequence[Any]
    checked: tuple[int, ...]
    base: Sequence[torch.Tensor]
    floors: Sequence[float]
    method: str
    eps: float


def judge(data: PairData, fd: Differences, output: int, *, detail_limit: int, arg: int | None = None) -> PairReport:
    """The pair's report; a failing pair is probed at its failing input elements first.

    Args:
        output: the index into `fd.checked` of the output this pair differentiates.
        arg: the index into `fd.args` of the input it is differentiated by, when that
            is not `data.input_index`.
    """
    arg = data.input_index if arg is None else arg
    report = compare_pair(data, detail_limit=detail_limit)
    if report.passed or report.blame == Blame.NONFINITE:
        return report
    n_in = data.numerical.shape[1]  # values are (m_o, n_i) Jacobians
    cols = torch.unique(torch.tensor(report.failed, dtype=torch.long) % n_in)[:KINK_COLUMNS]
    atol, rtol = data.tolerance("a", "n")
    tested = {"a": data.autograd.reshape(-1, n_in)}
    if data.expected is not None:
        tested["e"] = data.expected.reshape(-1, n_in)
    device = fd.args[arg].device
    probe = probe_columns(
        fd.fn,
        fd.args,
        (fd.checked[output], arg),
        fd.checked,
        fd.base[output],
        cols.to(device),
        eps=fd.eps,
        method=fd.method,
        floor=fd.floors[output],
        atol=atol,
        rtol=rtol,
        tested=tested,
    )
    report = compare_pair(replace(data, probe=probe), detail_limit=detail_limit)
    return _floor_blame(report, fd.floors[output], atol)


def judge_direction(
    data: PairData,
    at: Callable[[float], torch.Tensor],
    base: torch.Tensor,
    *,
    eps: float,
    floor: float,
    detail_limit: int,
) -> PairReport:
    """The report of a pair of directional derivatives (H v); a failing one is probed along its direction.

    Args:
        at: the function differenced, at x + s eps v for a step multiple s (1, -1, 2, -2).
        base: that function at x.
        floor: the rounding floor of its central differences.
    """
    report = compare_pair(data, detail_limit=detail_limit)
    if report.passed or report.blame == Blame.NONFINITE:
        return report
    atol, rtol = data.tolerance("a", "n")

    def column(t: torch.Tensor) -> torch.Tensor:
        return t.detach().reshape(-1, 1).to(device="cpu", dtype=torch.float64)

    tested = {"a": column(data.autograd)}
    if data.expected is not None:
        tested["e"] = column(data.expected)
    plus1, minus1, plus2, minus2 = (column(at(s)) for s in (1.0, -1.0, 2.0, -2.0))
    kink, verified, valid, smooth = probe_steps(
        (plus1, minus1, plus2, minus2), column(base), h=eps, floor=floor, atol=atol, rtol=rtol, tested=tested
    )
    probe = Probe(
        kink=kink.reshape(-1),
        verified=verified.reshape(-1),
        valid={k: v.reshape(-1) for k, v in valid.items()},
        smooth=smooth.reshape(-1),
    )
    report = compare_pair(replace(data, probe=probe), detail_limit=detail_limit)
    return _floor_blame(report, floor, atol)


def _floor_blame(pair: PairReport, floor: float, atol: float) -> PairReport:
    """A failure no bigger than the finite differences' rounding floor is theirs to explain."""
    if pair.passed or pair.blame == Blame.NONFINITE or floor <= atol or pair.max_abs_error > 10 * floor:
        return pair
    return replace(pair, blame=Blame.NUMERICAL, constant_ratio=None)
