"""Comparing the three sides of one (output, input) pair, element by element."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .report import Blame, Comparison, Element, PairReport

__all__ = ["PairData", "compare_pair", "WORST_ELEMENTS"]

WORST_ELEMENTS = 10  # how many of the worst elements every pair report keeps


@dataclass(frozen=True, slots=True)
class PairData:
    """One pair's float64 values, any layout of `numel` elements, and how to judge them.

    The three value tensors share one shape (flat, or (m_o, n_i)); `kinks` too.
    """

    output_index: int
    input_index: int
    output_shape: tuple[int, ...]
    input_shape: tuple[int, ...]
    autograd: torch.Tensor
    numerical: torch.Tensor
    expected: torch.Tensor | None
    kinks: torch.Tensor | None
    atol: float
    rtol: float


@dataclass(frozen=True, slots=True)
class _Side:
    """One comparison `left ~ right` over every element (flat); `right` is the reference."""

    name: str
    left: torch.Tensor
    right: torch.Tensor
    diff: torch.Tensor  # |left - right|, NaN read as inf
    violation: torch.Tensor  # diff / tolerance: above 1 fails
    failed: torch.Tensor
    max_rel: float

    def rel(self, k: int) -> float:
        """The relative error of flat element k."""
        ref, diff = abs(_at(self.right, k)), float(self.diff[k])
        return diff / ref if ref > 0 else (0.0 if diff == 0 else math.inf)


def _side(name: str, left: torch.Tensor, right: torch.Tensor, data: PairData) -> _Side:
    # Few passes over memory: these tensors can hold millions of elements.
    diff = torch.sub(left, right).abs_().nan_to_num_(nan=math.inf, posinf=math.inf).reshape(-1)
    ref = right.abs().reshape(-1)
    tol = ref.mul(data.rtol).add_(data.atol)
    violation = diff / tol
    if data.atol == 0:  # 0/0 is no violation
        violation.nan_to_num_(nan=0.0, posinf=math.inf)
    rel = (diff / ref).nan_to_num_(nan=0.0, posinf=math.inf)
    max_rel = float(rel.max()) if rel.numel() else 0.0
    return _Side(name, left, right, diff, violation, diff > tol, max_rel)


def compare_pair(data: PairData, *, detail_limit: int) -> PairReport:
    """Judges one pair: pass/fail per element, the worst element, and which side to blame."""
    a, n, e = data.autograd, data.numerical, data.expected
    sides = [_side("autograd~numerical", a, n, data)]
    if e is not None:
        sides += [_side("expected~autograd", e, a, data), _side("expected~numerical", e, n, data)]
    failed, error, violation = sides[0].failed, sides[0].diff, sides[0].violation
    for s in sides[1:]:
        failed = failed | s.failed
        error = torch.maximum(error, s.diff)
        violation = torch.maximum(violation, s.violation)
    comparisons = tuple(_comparison(s) for s in sides)
    failed_count = sum(c.failed_count for c in comparisons) and int(failed.sum())
    kinks = None if data.kinks is None else data.kinks.reshape(-1)
    blame = _blame(sides, failed, kinks) if failed_count else Blame.NONE
    shape = tuple(data.output_shape) + tuple(data.input_shape)
    worst = tuple(
        _element((a, n, e), shape, k, error, sides, failed) for k in _ranked(violation, failed_count)
    )
    small = failed.numel() <= detail_limit
    return PairReport(
        output_index=data.output_index,
        input_index=data.input_index,
        output_shape=tuple(data.output_shape),
        input_shape=tuple(data.input_shape),
        shape=shape,
        numel=failed.numel(),
        passed=failed_count == 0,
        blame=blame,
        max_abs_error=max((c.max_abs_error for c in comparisons), default=0.0),
        max_rel_error=max((c.max_rel_error for c in comparisons), default=0.0),
        failed_count=failed_count,
        worst=worst[0] if worst else _empty_element(shape),
        worst_elements=worst,
        comparisons=comparisons,
        failed=tuple(torch.nonzero(failed).reshape(-1)[:detail_limit].tolist()) if failed_count else (),
        kink_count=int((kinks & failed).sum()) if (failed_count and kinks is not None) else 0,
        autograd=_listed(a) if small else None,
        numerical=_listed(n) if small else None,
        expected=_listed(e) if (small and e is not None) else None,
        error=_listed(error) if small else None,
        failed_mask=tuple(failed.tolist()) if small else None,
        constant_ratio=_constant_ratio(blame, a, n, e, failed) if failed_count else None,
    )


def _comparison(side: _Side) -> Comparison:
    count = int(side.failed.sum())
    return Comparison(
        name=side.name,
        passed=count == 0,
        max_abs_error=float(side.diff.max()) if side.diff.numel() else 0.0,
        max_rel_error=side.max_rel,
        failed_count=count,
    )


def _listed(t: torch.Tensor) -> tuple[float, ...]:
    return tuple(float(v) for v in t.reshape(-1).tolist())


def _at(t: torch.Tensor, k: int) -> float:
    """Flat element k of `t` in row-major order, without copying a non-contiguous `t`."""
    if t.is_contiguous():
        return float(t.reshape(-1)[k])
    return float(t[_unravel(k, tuple(t.shape))])


def _ranked(violation: torch.Tensor, failed_count: int) -> list[int]:
    """Flat indices of the worst elements, largest violation first (one when all pass)."""
    if violation.numel() == 0:
        return []
    if failed_count == 0:
        return [int(violation.argmax())]
    key = violation.nan_to_num(nan=math.inf)
    return torch.topk(key, min(WORST_ELEMENTS, key.numel())).indices.tolist()


def _blame(sides: list[_Side], failed: torch.Tensor, kinks: torch.Tensor | None) -> str:
    an = bool(sides[0].failed.any())
    all_kinks = kinks is not None and bool((kinks | ~failed).all())
    if len(sides) == 1:
        return Blame.NUMERICAL if all_kinks else Blame.AUTOGRAD
    ea, en = bool(sides[1].failed.any()), bool(sides[2].failed.any())
    worst = {s.name: float(s.violation.max()) for s in sides}
    if ea and en and not an:
        return Blame.EXPECTED
    if an and ea and not en:
        return Blame.AUTOGRAD
    if an and en and not ea:
        return Blame.NUMERICAL
    if an and ea and en:
        return Blame.NUMERICAL if all_kinks else Blame.UNCLEAR
    # One comparison fails alone: blame the side farther from the third one.
    if ea:
        return Blame.EXPECTED if worst["expected~numerical"] >= worst["autograd~numerical"] else Blame.AUTOGRAD
    if an:
        return Blame.AUTOGRAD if worst["expected~autograd"] >= worst["expected~numerical"] else Blame.NUMERICAL
    return Blame.EXPECTED if worst["expected~autograd"] >= worst["autograd~numerical"] else Blame.NUMERICAL


def _constant_ratio(
    blame: str, a: torch.Tensor, n: torch.Tensor, e: torch.Tensor | None, failed: torch.Tensor
) -> float | None:
    """The factor by which the blamed side is off, when it is the same at every failing element."""
    pairs = {Blame.EXPECTED: (e, a), Blame.AUTOGRAD: (a, n), Blame.NUMERICAL: (n, a)}
    top, bottom = pairs.get(blame, (None, None))
    if top is None or bottom is None:
        return None
    top, bottom = top.reshape(-1)[failed], bottom.reshape(-1)[failed]
    if top.numel() == 0 or not bool((bottom.abs() > 1e-12).all()) or not bool(top.isfinite().all()):
        return None
    ratio = top / bottom
    mid = float(ratio.median())
    if mid == 0 or not bool(((ratio - mid).abs() <= 1e-3 * abs(mid)).all()):
        return None
    return mid


def _element(
    values: tuple[torch.Tensor, torch.Tensor, torch.Tensor | None],
    shape: tuple[int, ...],
    k: int,
    error: torch.Tensor,
    sides: list[_Side],
    failed: torch.Tensor,
) -> Element:
    a, n, e = values
    return Element(
        index=_unravel(k, shape),
        autograd=_at(a, k),
        numerical=_at(n, k),
        expected=None if e is None else _at(e, k),
        abs_error=float(error[k]),
        rel_error=max(s.rel(k) for s in sides),
        failed=bool(failed[k]),
    )


def _empty_element(shape: tuple[int, ...]) -> Element:
    nan = float("nan")
    return Element(tuple(0 for _ in shape), nan, nan, None, 0.0, 0.0, False)


def _unravel(k: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    index = []
    for size in reversed(shape):
        index.append(k % size)
        k //= size
    return tuple(reversed(index))
