"""Comparing the three sides of one (output, input) pair, element by element, in blocks."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from gradcheck.report import Blame, Comparison, Element, PairReport

__all__ = ["PairData", "compare_pair", "WORST_ELEMENTS", "BLOCK_ELEMENTS"]

WORST_ELEMENTS = 10  # how many of the worst elements every pair report keeps
# Elements compared at a time: a block's temporaries stay in cache, and a Jacobian of
# millions of elements costs a few blocks' memory, not several copies of itself.
BLOCK_ELEMENTS = 1 << 16

# Each comparison `left ~ right`; the right-hand side is the reference rtol scales with.
_SIDES = (
    ("autograd~numerical", "a", "n"),
    ("expected~autograd", "e", "a"),
    ("expected~numerical", "e", "n"),
)
# For each blame, the ratio that says by what factor the blamed side is off.
_RATIOS = {Blame.EXPECTED: ("e", "a"), Blame.AUTOGRAD: ("a", "n"), Blame.NUMERICAL: ("n", "a")}


@dataclass(frozen=True, slots=True)
class PairData:
    """One pair's float64 values and how to judge them.

    The value tensors share one shape (flat, or (m_o, n_i)) and are read in
    row-major order; so is `kinks`, which marks elements where fn has a kink.
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


@dataclass(slots=True)
class _SideStats:
    name: str
    left: str
    right: str
    failed: int = 0
    max_abs: float = 0.0
    max_rel: float = 0.0
    max_violation: float = 0.0


@dataclass(slots=True)
class _Tally:
    """What the blocks add up to."""

    sides: list[_SideStats]
    failed: int = 0
    kinks: int = 0
    failed_at: list[torch.Tensor] = field(default_factory=list)
    top_key: list[torch.Tensor] = field(default_factory=list)
    top_index: list[torch.Tensor] = field(default_factory=list)
    top_failed: list[torch.Tensor] = field(default_factory=list)
    ratio_low: dict[str, float] = field(default_factory=dict)
    ratio_high: dict[str, float] = field(default_factory=dict)
    ratio_usable: dict[str, bool] = field(default_factory=dict)
    error: list[torch.Tensor] = field(default_factory=list)
    mask: list[torch.Tensor] = field(default_factory=list)
    nonfinite: dict[str, int] = field(default_factory=dict)  # side key -> NaN/Inf elements


def compare_pair(data: PairData, *, detail_limit: int) -> PairReport:
    """Judges one pair: pass/fail per element, the worst elements, and which side to blame."""
    values = {"a": data.autograd.reshape(-1), "n": data.numerical.reshape(-1)}
    if data.expected is not None:
        values["e"] = data.expected.reshape(-1)
    kinks = None if data.kinks is None else data.kinks.reshape(-1)
    sides = [_SideStats(*s) for s in _SIDES if s[1] in values and s[2] in values]
    tally = _Tally(sides)
    small = values["a"].numel() <= detail_limit
    judged, judged_kinks, positions = values, kinks, None
    if not small:
        positions = _nonzero_positions(values)
        if positions is not None:
            judged = {k: v[positions] for k, v in values.items()}
            judged_kinks = None if kinks is None else kinks[positions]
    numel = judged["a"].numel()
    for start in range(0, numel, BLOCK_ELEMENTS):
        stop = min(numel, start + BLOCK_ELEMENTS)
        block = {k: v[start:stop] for k, v in judged.items()}
        _block(
            block,
            start,
            None if judged_kinks is None else judged_kinks[start:stop],
            data,
            tally,
            small,
            detail_limit,
        )
    if positions is not None:  # back from judged to flat Jacobian indices
        tally.top_index = [positions[i] for i in tally.top_index]
        tally.failed_at = [positions[i] for i in tally.failed_at]
    return _pair_report(data, values, tally, small, detail_limit)


def _nonzero_positions(values: dict[str, torch.Tensor]) -> torch.Tensor | None:
    """Where any side is non-zero, when that is under a quarter of a big Jacobian.

    Elements that are exactly 0 on every side agree and pass; diagonal or banded
    Jacobians (elementwise functions) are mostly such zeros, and judging only the
    rest saves a dozen full passes over n*n elements. NaN counts as non-zero.
    """
    nonzero = None
    for v in values.values():
        nonzero = v != 0 if nonzero is None else nonzero.logical_or_(v != 0)
    assert nonzero is not None  # noqa: S101 - typing only
    positions = torch.nonzero(nonzero).reshape(-1)
    if positions.numel() * 4 >= nonzero.numel():
        return None
    return positions if positions.numel() else torch.zeros(1, dtype=torch.long, device=nonzero.device)


def _block(
    values: dict[str, torch.Tensor],
    start: int,
    kinks: torch.Tensor | None,
    data: PairData,
    tally: _Tally,
    keep: bool,
    detail_limit: int,
) -> None:
    failed = error = violation = None
    # A NaN or Inf on any side is a failure of its own: |a - b| <= tol is no
    # test there (inf - inf is NaN, and a NaN reference makes tol NaN).
    for name, v in values.items():
        bad = ~torch.isfinite(v)
        count = int(bad.sum())
        if count:
            tally.nonfinite[name] = tally.nonfinite.get(name, 0) + count
            failed = bad if failed is None else failed.logical_or_(bad)
    for side in tally.sides:
        left, right = values[side.left], values[side.right]
        diff = torch.sub(left, right).abs_().nan_to_num_(nan=math.inf, posinf=math.inf)
        ref = right.abs()
        tol = ref.mul(data.rtol).add_(data.atol)
        over = diff / tol
        if data.atol == 0:  # 0/0 is no violation
            over.nan_to_num_(nan=0.0, posinf=math.inf)
        side_failed = ~(diff <= tol) | ~torch.isfinite(left) | ~torch.isfinite(right)
        side.failed += int(side_failed.sum())
        side.max_abs = max(side.max_abs, float(diff.max()))
        side.max_rel = max(
            side.max_rel, float((diff / ref).nan_to_num_(nan=0.0, posinf=math.inf).max())
        )
        side.max_violation = max(side.max_violation, float(over.max()))
        failed = side_failed if failed is None else failed.logical_or_(side_failed)
        error = diff if error is None else torch.maximum(error, diff)
        violation = over if violation is None else torch.maximum(violation, over)
    assert failed is not None and error is not None and violation is not None  # noqa: S101 - typing only
    key = violation.nan_to_num_(nan=math.inf)
    if keep:
        tally.error.append(error)
        tally.mask.append(failed)
    count = int(failed.sum())
    if count:
        at = torch.nonzero(failed).reshape(-1)
        chosen = at[_top(key[at], WORST_ELEMENTS)]
        _failing(values, start, kinks, failed, at, tally, detail_limit)
    else:  # a passing block only matters if the whole pair passes: keep its worst element
        chosen = key.argmax().reshape(1)
    tally.top_key.append(key[chosen])
    tally.top_index.append(chosen + start)
    tally.top_failed.append(torch.full((chosen.numel(),), count > 0))


def _failing(
    values: dict[str, torch.Tensor],
    start: int,
    kinks: torch.Tensor | None,
    failed: torch.Tensor,
    at: torch.Tensor,
    tally: _Tally,
    detail_limit: int,
) -> None:
    """Tallies a block's failing elements (`at`): where, kinks, and the ratios between sides."""
    if tally.failed < detail_limit:
        tally.failed_at.append(at[: detail_limit - tally.failed] + start)
    tally.failed += at.numel()
    if kinks is not None:
        tally.kinks += int((kinks & failed).sum())
    for blame, (top_name, bottom_name) in _RATIOS.items():
        if top_name not in values:
            continue
        top, bottom = values[top_name][failed], values[bottom_name][failed]
        usable = bool((bottom.abs() > 1e-12).all()) and bool(top.isfinite().all())
        tally.ratio_usable[blame] = tally.ratio_usable.get(blame, True) and usable
        if usable:
            ratio = top / bottom
            tally.ratio_low[blame] = min(tally.ratio_low.get(blame, math.inf), float(ratio.min()))
            tally.ratio_high[blame] = max(
                tally.ratio_high.get(blame, -math.inf), float(ratio.max())
            )


def _pair_report(
    data: PairData, values: dict[str, torch.Tensor], tally: _Tally, small: bool, detail_limit: int
) -> PairReport:
    shape = tuple(data.output_shape) + tuple(data.input_shape)
    comparisons = tuple(
        Comparison(s.name, s.failed == 0, s.max_abs, s.max_rel, s.failed) for s in tally.sides
    )
    if tally.nonfinite:
        blame = Blame.NONFINITE
    else:
        blame = _blame(tally) if tally.failed else Blame.NONE
    worst = tuple(_element(values, shape, k, data, tally) for k in _ranked(tally))
    failed_at = torch.cat(tally.failed_at)[:detail_limit].tolist() if tally.failed_at else []
    e = values.get("e")
    return PairReport(
        output_index=data.output_index,
        input_index=data.input_index,
        output_shape=tuple(data.output_shape),
        input_shape=tuple(data.input_shape),
        shape=shape,
        numel=values["a"].numel(),
        passed=tally.failed == 0,
        blame=blame,
        max_abs_error=max((c.max_abs_error for c in comparisons), default=0.0),
        max_rel_error=max((c.max_rel_error for c in comparisons), default=0.0),
        failed_count=tally.failed,
        worst=worst[0] if worst else _empty_element(shape),
        worst_elements=worst,
        comparisons=comparisons,
        failed=tuple(failed_at),
        kink_count=tally.kinks,
        autograd=_listed(values["a"]) if small else None,
        numerical=_listed(values["n"]) if small else None,
        expected=_listed(e) if (small and e is not None) else None,
        error=_listed(torch.cat(tally.error))
        if (small and tally.error)
        else (() if small else None),
        failed_mask=tuple(torch.cat(tally.mask).tolist())
        if (small and tally.mask)
        else (() if small else None),
        constant_ratio=_constant_ratio(tally, blame),
        nonfinite=tuple((_SIDE_NAMES[k], n) for k, n in sorted(tally.nonfinite.items(), key=_side_order)),
    )


_SIDE_NAMES = {"a": "autograd", "n": "numerical", "e": "expected"}


def _side_order(item: tuple[str, int]) -> int:
    return "ane".index(item[0])


def _listed(t: torch.Tensor) -> tuple[float, ...]:
    return tuple(t.to(torch.float64).tolist())  # float64 lists hold Python floats


def _top(key: torch.Tensor, k: int) -> torch.Tensor:
    """Indices of the k largest keys in ascending index order, ties going to lower indices.

    topk breaks ties arbitrarily; this keeps reports identical however they are blocked.
    """
    k = min(k, key.numel())
    threshold = torch.topk(key, k).values[-1]
    above = torch.nonzero(key > threshold).reshape(-1)
    ties = torch.nonzero(key == threshold).reshape(-1)[: k - above.numel()]
    return torch.sort(torch.cat([above, ties])).values


def _ranked(tally: _Tally) -> list[int]:
    """Flat indices of the worst elements, largest violation first.

    The failing ones (at most WORST_ELEMENTS) when any fail, else the single worst.
    """
    if not tally.top_key:
        return []
    keys, indices = torch.cat(tally.top_key), torch.cat(tally.top_index)
    if tally.failed:
        failing = torch.cat(tally.top_failed)
        keys, indices = keys[failing], indices[failing]
    order = torch.sort(keys, descending=True, stable=True).indices  # candidates are in index order
    return indices[order[: WORST_ELEMENTS if tally.failed else 1]].tolist()


def _blame(tally: _Tally) -> str:
    flags = {s.name: s.failed > 0 for s in tally.sides}
    worst = {s.name: s.max_violation for s in tally.sides}
    all_kinks = tally.kinks == tally.failed
    an = flags["autograd~numerical"]
    if len(tally.sides) == 1:
        return Blame.NUMERICAL if all_kinks else Blame.AUTOGRAD
    ea, en = flags["expected~autograd"], flags["expected~numerical"]
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
        return (
            Blame.EXPECTED
            if worst["expected~numerical"] >= worst["autograd~numerical"]
            else Blame.AUTOGRAD
        )
    if an:
        return (
            Blame.AUTOGRAD
            if worst["expected~autograd"] >= worst["expected~numerical"]
            else Blame.NUMERICAL
        )
    return (
        Blame.EXPECTED
        if worst["expected~autograd"] >= worst["autograd~numerical"]
        else Blame.NUMERICAL
    )


def _constant_ratio(tally: _Tally, blame: str) -> float | None:
    """The factor by which the blamed side is off, when it is the same at every failing element."""
    if tally.failed < 2 or not tally.ratio_usable.get(blame, False):
        return None  # one element is always "off by a constant factor": say nothing
    low, high = tally.ratio_low[blame], tally.ratio_high[blame]
    mid = (low + high) / 2
    if mid == 0 or high - low > 1e-3 * max(abs(low), abs(high)):
        return None
    return mid


def _element(
    values: dict[str, torch.Tensor], shape: tuple[int, ...], k: int, data: PairData, tally: _Tally
) -> Element:
    at = {name: float(v[k]) for name, v in values.items()}
    diffs, rels, failed = [], [], False
    for side in tally.sides:
        left, right = at[side.left], at[side.right]
        diff = abs(left - right)
        diff = math.inf if math.isnan(diff) else diff
        diffs.append(diff)
        rels.append(diff / abs(right) if right != 0 else (0.0 if diff == 0 else math.inf))
        failed = failed or not diff <= data.atol + data.rtol * abs(right)
    return Element(
        index=_unravel(k, shape),
        autograd=at["a"],
        numerical=at["n"],
        expected=at.get("e"),
        abs_error=max(diffs),
        rel_error=max(rels),
        failed=failed,
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
