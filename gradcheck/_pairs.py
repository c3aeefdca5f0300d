"""Judging one pair: compare, and when it fails, probe finite differences at more step sizes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch

from gradcheck._compare import PairData, compare_pair
from gradcheck._probe import KINK_COLUMNS, probe_columns
from gradcheck.report import Blame, PairReport

__all__ = ["Differences", "judge"]


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


def _floor_blame(pair: PairReport, floor: float, atol: float) -> PairReport:
    """A failure no bigger than the finite differences' rounding floor is theirs to explain."""
    if pair.passed or pair.blame == Blame.NONFINITE or floor <= atol or pair.max_abs_error > 10 * floor:
        return pair
    return replace(pair, blame=Blame.NUMERICAL, constant_ratio=None)
