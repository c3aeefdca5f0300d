"""bfloat16 and float16 autograd: tolerances for their rounding, and a float64 second opinion."""

from __future__ import annotations

from dataclasses import replace

import torch

from gradcheck._compare import PairData, compare_pair
from gradcheck.report import Blame, PairReport

__all__ = ["LOW_PRECISION", "is_low_precision", "tested_tolerance", "TOLERANCE_UNITS", "suspect", "as_rounding"]

LOW_PRECISION = (torch.bfloat16, torch.float16)
# A gradient computed in a low-precision dtype carries a few rounding errors of its unit
# roundoff u (2**-7 for bfloat16, 2**-10 for float16), more where terms cancel (1 - tanh^2
# near |x| = 3); like jax's per-dtype defaults, both tolerances become a multiple of u.
TOLERANCE_UNITS = 8


def is_low_precision(*dtypes: torch.dtype) -> bool:
    """Whether any of the dtypes is bfloat16 or float16."""
    return any(d in LOW_PRECISION for d in dtypes)


def tested_tolerance(
    dtypes: tuple[torch.dtype, ...], atol: float, rtol: float, scale: float
) -> tuple[float, float] | None:
    """(atol, rtol) for comparisons with a side computed in `dtypes`, or None if they need no widening.

    Args:
        scale: the largest |value| of the pair's finite differences; atol grows with it,
            as rounding errors do.
    """
    low = [d for d in dtypes if d in LOW_PRECISION]
    if not low:
        return None
    unit = max(torch.finfo(d).eps for d in low)
    return max(atol, TOLERANCE_UNITS * unit * scale), max(rtol, TOLERANCE_UNITS * unit)


def suspect(report: PairReport, *, third_tested: bool = False) -> bool:
    """Whether a failing pair blames a low-precision derivative (the third side too, when it is one)."""
    blames = (Blame.AUTOGRAD, Blame.UNCLEAR, Blame.SHARED) + ((Blame.EXPECTED,) if third_tested else ())
    return not report.passed and report.blame in blames


def as_rounding(
    report: PairReport, data: PairData, precise: torch.Tensor, third: torch.Tensor | None = None
) -> PairReport:
    """`report`, or its blame turned to rounding when the tested side run in float64 agrees.

    Args:
        precise: the tested side computed on the float64 copies.
        third: the third side computed on them too, when it is a low-precision derivative as well.
    """
    expected = data.expected if third is None else third.reshape(data.autograd.shape).cpu()
    again = compare_pair(
        replace(data, autograd=precise.reshape(data.autograd.shape).cpu(), expected=expected, tested_tol=None),
        detail_limit=0,
    )
    return replace(report, blame=Blame.ROUNDING, constant_ratio=None) if again.passed else report
