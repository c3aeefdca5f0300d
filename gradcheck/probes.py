"""Finite differences at two step sizes: kinks, one-sided slopes, and whether to believe them.

At a failing element the checker evaluates f at x +- h e_j and x +- 2h e_j. The
second difference (f(x+h) - 2 f(x) + f(x-h)) / h is the gap between the one-sided
slopes: about h f'' where f is smooth (so it doubles with the step), the same at h
and 2h at a corner (relu at 0), and halving at a step. Central differences at h and
2h differ by about 3 h^2 f''' (Richardson): when that is far below their gap to
autograd, and the gap far above the rounding floor, finite differences are right.
Public: the model check (`graphviz_app.tracing.model_check`) judges its probes with `probe_steps` too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from gradcheck._compare import Probe
from gradcheck._numerical import evaluate_steps

__all__ = ["probe_columns", "probe_steps", "KINK_COLUMNS"]

KINK_COLUMNS = 1000  # at most this many failing input elements are probed

Pair = tuple[int, int]


def probe_columns(
    fn: Callable[..., Any],
    args: Sequence[Any],
    pair: Pair,
    checked: Sequence[int],
    base: torch.Tensor,
    cols: torch.Tensor,
    *,
    eps: float,
    method: str,
    floor: float,
    atol: float,
    rtol: float,
    tested: dict[str, torch.Tensor],
) -> Probe:
    """The Probe of pair (o, i) at the input elements `cols`; masks are (m_o, n_i).

    Args:
        base: fn's output o at x (float64 or its own dtype).
        floor: the rounding floor of a central difference of output o.
        tested: the (m_o, n_i) values on cpu of the sides judged at kinks: "a" (the side
            under test) and, when given, "e" (the third opinion).
    """
    o, i = pair
    plus1, minus1, plus2, minus2 = (
        step[list(checked).index(o)].T.cpu()
        for step in evaluate_steps(fn, args, i, checked, cols, eps=eps, method=method, steps=(1.0, -1.0, 2.0, -2.0))
    )
    cols = cols.cpu()
    y0 = base.detach().reshape(-1, 1).to(device="cpu", dtype=torch.float64)
    at_cols = {side: values[:, cols].to(torch.float64) for side, values in tested.items()}
    kink, verified, valid, smooth = probe_steps(
        (plus1, minus1, plus2, minus2), y0, h=eps, floor=floor, atol=atol, rtol=rtol, tested=at_cols
    )
    shape = tested["a"].shape

    def full(part: torch.Tensor) -> torch.Tensor:
        mask = torch.zeros(shape, dtype=torch.bool, device=part.device)
        mask[:, cols] = part
        return mask

    return Probe(
        kink=full(kink), verified=full(verified), valid={k: full(v) for k, v in valid.items()}, smooth=full(smooth)
    )


def probe_steps(
    steps: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor],
    y0: torch.Tensor,
    *,
    h: float,
    floor: float,
    atol: float,
    rtol: float,
    tested: dict[str, torch.Tensor],
) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor], torch.Tensor]:
    """Masks kink, verified, valid[side], smooth from f at x + h, x - h, x + 2h, x - 2h (float64, cpu).

    `y0` is f at x, broadcast against the steps; `tested` holds each judged side's values
    (the shape of the steps).
    """
    plus1, minus1, plus2, minus2 = steps
    right, left = (plus1 - y0) / h, (y0 - minus1) / h
    jump1 = (plus1 - 2 * y0 + minus1).abs() / h
    jump2 = (plus2 - 2 * y0 + minus2).abs() / (2 * h)
    central1, central2 = (plus1 - minus1) / (2 * h), (plus2 - minus2) / (4 * h)
    # Where f is smooth the second difference grows with the step (h f''): no kink.
    kink = (jump1 > atol + rtol * central1.abs() + 4 * floor) & (jump2 < jump1 * 1.5)
    verified = kink & (jump2 >= jump1 * (2 / 3))
    low, high = torch.minimum(left, right), torch.maximum(left, right)
    slack = atol + rtol * torch.maximum(low.abs(), high.abs()) + 4 * floor
    gap = (tested["a"] - central1).abs()
    smooth = ~kink & ((central1 - central2).abs() <= 0.1 * gap) & (gap > 10 * floor)
    valid = {side: (v >= low - slack) & (v <= high + slack) for side, v in tested.items()}
    return kink, verified, valid, smooth
