"""Comparing the three sides of one (output, input) pair, element by element."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .report import Blame, Comparison, Element, PairReport

__all__ = ["PairData", "compare_pair", "WORST_ELEMENTS"]

WORST_ELEMENTS = 10  # how many of the worst elements every pair report keeps


@dataclass(frozen=True, slots=True)
class PairData:
    """One pair's flat float64 values, and what is needed to judge them."""

    output_index: int
    input_index: int
    output_shape: tuple[int, ...]
    input_shape: tuple[int, ...]
    autograd: torch.Tensor
    numerical: torch.Tensor
    expected: torch.Tensor | None
    kinks: torch.Tensor | None
    atol: float | torch.Tensor
    rtol: float


@dataclass(frozen=True, slots=True)
class _Side:
    """One comparison `left ~ right` over every element; `right` is the reference."""

    name: str
    diff: torch.Tensor
    rel: torch.Tensor
    violation: torch.Tensor  # diff / tolerance: above 1 fails
    failed: torch.Tensor


def _side(name: str, left: torch.Tensor, right: torch.Tensor, data: PairData) -> _Side:
    diff = (left - right).abs()
    diff = torch.where(torch.isnan(diff), torch.full_like(diff, float("inf")), diff)
    tol = data.atol + data.rtol * right.abs()
    ref = right.abs()
    rel = torch.where(ref > 0, diff / ref.clamp_min(1e-300), torch.where(diff > 0, float("inf"), 0.0))
    violation = torch.where(tol > 0, diff / tol.clamp_min(1e-300), torch.where(diff > 0, float("inf"), 0.0))
    return _Side(name, diff, rel, violation, ~(diff <= tol))


def compare_pair(data: PairData, *, detail_limit: int) -> PairReport:
    """Judges one pair: pass/fail per element, the worst element, and which side to blame."""
    a, n, e = data.autograd, data.numerical, data.expected
    sides = [_side("autograd~numerical", a, n, data)]
    if e is not None:
        sides += [_side("expected~autograd", e, a, data), _side("expected~numerical", e, n, data)]
    failed = torch.zeros_like(a, dtype=torch.bool)
    error = torch.zeros_like(a)
    violation = torch.zeros_like(a)
    for s in sides:
        failed |= s.failed
        error = torch.maximum(error, s.diff)
        violation = torch.maximum(violation, s.violation)
    comparisons = tuple(
        Comparison(
            name=s.name,
            passed=not bool(s.failed.any()),
            max_abs_error=float(s.diff.max()) if s.diff.numel() else 0.0,
            max_rel_error=float(s.rel.max()) if s.rel.numel() else 0.0,
            failed_count=int(s.failed.sum()),
        )
        for s in sides
    )
    kinks = data.kinks if data.kinks is not None else torch.zeros_like(failed)
    blame = _blame(sides, failed, kinks)
    ranked = _ranked(violation, failed)
    shape = tuple(data.output_shape) + tuple(data.input_shape)
    worst = tuple(_element(data, shape, int(k), error, sides, failed) for k in ranked[:WORST_ELEMENTS])
    small = a.numel() <= detail_limit
    failed_flat = torch.nonzero(failed).reshape(-1)[:detail_limit]
    return PairReport(
        output_index=data.output_index,
        input_index=data.input_index,
        output_shape=tuple(data.output_shape),
        input_shape=tuple(data.input_shape),
        shape=shape,
        numel=a.numel(),
        passed=not bool(failed.any()),
        blame=blame,
        max_abs_error=max((c.max_abs_error for c in comparisons), default=0.0),
        max_rel_error=max((c.max_rel_error for c in comparisons), default=0.0),
        failed_count=int(failed.sum()),
        worst=worst[0] if worst else _empty_element(shape),
        worst_elements=worst,
        comparisons=comparisons,
        failed=tuple(failed_flat.tolist()),
        kink_count=int((kinks & failed).sum()),
        autograd=_listed(a) if small else None,
        numerical=_listed(n) if small else None,
        expected=_listed(e) if (small and e is not None) else None,
        error=_listed(error) if small else None,
        failed_mask=tuple(failed.tolist()) if small else None,
        constant_ratio=_constant_ratio(blame, a, n, e, failed),
    )


def _listed(t: torch.Tensor) -> tuple[float, ...]:
    return tuple(float(v) for v in t.tolist())


def _ranked(violation: torch.Tensor, failed: torch.Tensor) -> list[int]:
    """Element indices, failing ones first, each group from the largest violation down."""
    key = torch.where(torch.isnan(violation), float("inf"), violation)
    count = min(WORST_ELEMENTS, key.numel())
    if count == 0:
        return []
    top = torch.topk(key, count).indices.tolist()
    return sorted(top, key=lambda k: (not bool(failed[k]), -float(key[k])))


def _blame(sides: list[_Side], failed: torch.Tensor, kinks: torch.Tensor) -> str:
    if not bool(failed.any()):
        return Blame.NONE
    an = bool(sides[0].failed.any())
    all_kinks = bool((kinks | ~failed).all())
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
    if blame not in pairs or pairs[blame][0] is None:
        return None
    top, bottom = pairs[blame]
    top, bottom = top[failed], bottom[failed]
    if top.numel() == 0 or not bool((bottom.abs() > 1e-12).all()) or not bool(top.isfinite().all()):
        return None
    ratio = top / bottom
    mid = float(ratio.median())
    if mid == 0 or not bool(((ratio - mid).abs() <= 1e-3 * abs(mid)).all()):
        return None
    return mid


def _element(
    data: PairData, shape: tuple[int, ...], k: int, error: torch.Tensor, sides: list[_Side], failed: torch.Tensor
) -> Element:
    return Element(
        index=_unravel(k, shape),
        autograd=float(data.autograd[k]),
        numerical=float(data.numerical[k]),
        expected=None if data.expected is None else float(data.expected[k]),
        abs_error=float(error[k]),
        rel_error=max(float(s.rel[k]) for s in sides),
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
