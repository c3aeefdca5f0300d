"""Comparing the three sides of one (output, input) pair, element by element, in blocks."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from gradcheck._blame import SideStats, Tally, blame_of, constant_ratio
from gradcheck.report import Check, Comparison, Element, PairReport

__all__ = ["PairData", "Probe", "compare_pair", "WORST_ELEMENTS", "BLOCK_ELEMENTS", "REV_SIDES"]

WORST_ELEMENTS = 10  # how many of the worst elements every pair report keeps
_SAMPLE = 4096  # elements looked at to tell a dense Jacobian from a mostly-zero one
# Elements compared at a time: a block's temporaries stay in cache, and a Jacobian of
# millions of elements costs a few blocks' memory, not several copies of itself.
BLOCK_ELEMENTS = 1 << 16

# Each comparison `left ~ right`; the right-hand side is the reference rtol scales with.
_PAIRS = (("a", "n"), ("e", "a"), ("e", "n"))
REV_SIDES = ("autograd", "numerical", "expected")


@dataclass(frozen=True, slots=True)
class Probe:
    """What finite differences at more step sizes say about a pair's failing elements.

    Flat boolean masks in row-major order of the pair's values; False where not probed.
    `kink`: the one-sided slopes differ (relu at 0, or a step). `verified`: a kink whose
    jump is the same at steps h and 2h, a true corner with two one-sided slopes.
    `valid[side]` ("a", "e"): that side's value lies between the one-sided slopes (a
    valid one-sided or sub-gradient). `smooth`: no kink, the central differences at h
    and 2h agree far better than they disagree with autograd, and the gap is far above
    the rounding floor, so finite differences are to be believed.
    """

    kink: torch.Tensor
    verified: torch.Tensor
    valid: dict[str, torch.Tensor]
    smooth: torch.Tensor


@dataclass(frozen=True, slots=True)
class PairData:
    """One pair's float64 values and how to judge them.

    The value tensors share one shape (flat, or (m_o, n_i)) and are read in
    row-major order. `sides` names the three value columns for people: autograd
    (the side under test), finite differences and the third opinion. `tested_tol`
    is (atol, rtol) for comparisons with the side under test (and with the third, when
    `third_tested`), when its dtype calls for wider tolerances than (atol, rtol). `kinks`: "fail", "warn" or "pass".
    """

    output_index: int
    input_index: int
    output_shape: tuple[int, ...]
    input_shape: tuple[int, ...]
    autograd: torch.Tensor
    numerical: torch.Tensor
    expected: torch.Tensor | None
    atol: float
    rtol: float
    probe: Probe | None = None
    kinks: str = "fail"
    check: str = Check.REV
    sides: tuple[str, str, str] = REV_SIDES
    tested_tol: tuple[float, float] | None = None
    third_tested: bool = False  # the third side is a low-precision derivative too (reverse mode)

    def tolerance(self, left: str, right: str) -> tuple[float, float]:
        """(atol, rtol) of the comparison left ~ right."""
        wide = ("a", "e") if self.third_tested else ("a",)
        if self.tested_tol is not None and any(side in (left, right) for side in wide):
            return self.tested_tol
        return self.atol, self.rtol


@dataclass(slots=True)
class _Flat:
    """The pair's values and masks as flat tensors, maybe only at the judged positions."""

    values: dict[str, torch.Tensor]
    kink: torch.Tensor | None = None
    accepted: torch.Tensor | None = None
    smooth: torch.Tensor | None = None
    invalid: dict[str, torch.Tensor] = field(default_factory=dict)

    def take(self, positions: torch.Tensor) -> _Flat:
        def pick(t: torch.Tensor | None) -> torch.Tensor | None:
            return None if t is None else t[positions]

        return _Flat(
            {k: v[positions] for k, v in self.values.items()},
            pick(self.kink),
            pick(self.accepted),
            pick(self.smooth),
            {k: v[positions] for k, v in self.invalid.items()},
        )

    def block(self, start: int, stop: int) -> _Flat:
        def part(t: torch.Tensor | None) -> torch.Tensor | None:
            return None if t is None else t[start:stop]

        return _Flat(
            {k: v[start:stop] for k, v in self.values.items()},
            part(self.kink),
            part(self.accepted),
            part(self.smooth),
            {k: v[start:stop] for k, v in self.invalid.items()},
        )


def _flat(data: PairData) -> _Flat:
    values = {"a": data.autograd.reshape(-1), "n": data.numerical.reshape(-1)}
    if data.expected is not None:
        values["e"] = data.expected.reshape(-1)
    flat = _Flat(values)
    probe = data.probe
    if probe is not None:
        flat.kink = probe.kink.reshape(-1)
        flat.smooth = probe.smooth.reshape(-1)
        valid = [probe.valid[k].reshape(-1) for k in ("a", "e") if k in values and k in probe.valid]
        flat.invalid = {k: probe.kink.reshape(-1) & ~probe.valid[k].reshape(-1) for k in probe.valid if k in values}
        if data.kinks != "fail":
            accepted = probe.verified.reshape(-1).clone()
            for v in valid:
                accepted &= v
            flat.accepted = accepted
    return flat


def compare_pair(data: PairData, *, detail_limit: int) -> PairReport:
    """Judges one pair: pass/fail per element, the worst elements, and which side to blame."""
    flat = _flat(data)
    values = flat.values
    names = dict(zip("ane", data.sides, strict=True))
    tally = Tally(
        [
            SideStats(f"{names[left]}~{names[right]}", left, right)
            for left, right in _PAIRS
            if {left, right} <= set(values)
        ]
    )
    small = values["a"].numel() <= detail_limit
    judged, positions = flat, None
    if not small:
        positions = _nonzero_positions(values)
        if positions is not None:
            judged = flat.take(positions)
    numel = judged.values["a"].numel()
    for start in range(0, numel, BLOCK_ELEMENTS):
        stop = min(numel, start + BLOCK_ELEMENTS)
        _block(judged.block(start, stop), start, data, tally, small, detail_limit)
    _locate_lazy(judged, data, tally)
    if positions is not None:  # back from judged to flat Jacobian indices
        tally.top_index = [positions[i] for i in tally.top_index]
        tally.failed_at = [positions[i] for i in tally.failed_at]
    return _pair_report(data, flat, tally, small, detail_limit)


def _nonzero_positions(values: dict[str, torch.Tensor]) -> torch.Tensor | None:
    """Where any side is non-zero, when that is under a quarter of a big Jacobian.

    Elements that are exactly 0 on every side agree and pass; diagonal or banded
    Jacobians (elementwise functions) are mostly such zeros, and judging only the
    rest saves a dozen full passes over n*n elements. NaN counts as non-zero. A
    side non-zero at half of an evenly spread sample settles it without a full pass.
    """
    total = values["a"].numel()
    step = max(1, total // _SAMPLE)
    if any(int(torch.count_nonzero(v[::step])) * 2 >= v[::step].numel() for v in values.values()):
        return None
    nonzero = None
    for v in values.values():
        nonzero = v != 0 if nonzero is None else nonzero.logical_or_(v != 0)
    assert nonzero is not None  # noqa: S101 - typing only
    positions = torch.nonzero(nonzero).reshape(-1)
    if positions.numel() * 4 >= nonzero.numel():
        return None
    return positions if positions.numel() else torch.zeros(1, dtype=torch.long, device=nonzero.device)


def _block(flat: _Flat, start: int, data: PairData, tally: Tally, keep: bool, detail_limit: int) -> None:
    if not keep and _passing_block(flat.values, start, data, tally):
        return
    values = flat.values
    failed = error = violation = None
    # A NaN or Inf on any side is a failure of its own: |a - b| <= tol is no
    # test there (inf - inf is NaN, and a NaN reference makes tol NaN).
    for name, v in values.items():
        bad = ~torch.isfinite(v)
        count = int(bad.sum())
        if count:
            tally.nonfinite[name] = tally.nonfinite.get(name, 0) + count
            failed = bad if failed is None else failed.logical_or_(bad)
    spared = flat.accepted
    would_fail = None
    for side in tally.sides:
        left, right = values[side.left], values[side.right]
        atol, rtol = data.tolerance(side.left, side.right)
        diff = torch.sub(left, right).abs_().nan_to_num_(nan=math.inf, posinf=math.inf)
        ref = right.abs()
        tol = ref.mul(rtol).add_(atol)
        over = diff / tol
        if atol == 0:  # 0/0 is no violation
            over.nan_to_num_(nan=0.0, posinf=math.inf)
        side_failed = ~(diff <= tol) | ~torch.isfinite(left) | ~torch.isfinite(right)
        if spared is not None:
            would_fail = side_failed.clone() if would_fail is None else would_fail.logical_or_(side_failed)
            side_failed &= ~spared
        side.failed += int(side_failed.sum())
        off_kink = side_failed if flat.kink is None else side_failed & ~flat.kink
        side.failed_off_kink += int(off_kink.sum())
        side.max_abs = max(side.max_abs, float(diff.max()))
        side.max_rel = max(side.max_rel, float((diff / ref).nan_to_num_(nan=0.0, posinf=math.inf).max()))
        side.max_violation = max(side.max_violation, float(over.max()))
        failed = side_failed if failed is None else failed.logical_or_(side_failed)
        error = diff if error is None else torch.maximum(error, diff)
        violation = over if violation is None else torch.maximum(violation, over)
    assert failed is not None and error is not None and violation is not None  # noqa: S101 - typing only
    if spared is not None and would_fail is not None:
        tally.accepted += int((would_fail & spared & ~failed).sum())
    key = violation.nan_to_num_(nan=math.inf)
    if keep:
        tally.error.append(error)
        tally.mask.append(failed)
    count = int(failed.sum())
    if count:
        at = torch.nonzero(failed).reshape(-1)
        chosen = at[_top(key[at], WORST_ELEMENTS)]
        _failing(flat, start, failed, at, tally, detail_limit)
    else:  # a passing block only matters if the whole pair passes: keep its worst element
        chosen = key.argmax().reshape(1)
    tally.top_key.append(key[chosen])
    tally.top_index.append(chosen + start)
    tally.top_failed.append(torch.full((chosen.numel(),), count > 0))


def _passing_block(values: dict[str, torch.Tensor], start: int, data: PairData, tally: Tally) -> bool:
    """Tallies a block in a few passes when every element passes; False (nothing tallied) else.

    A NaN or Inf on either side makes the difference NaN or Inf, so the block's
    largest violation is not <= 1 and the careful path takes over.
    """
    found = []
    for side in tally.sides:
        right = values[side.right]
        atol, rtol = data.tolerance(side.left, side.right)
        diff = torch.sub(values[side.left], right).abs_()
        ref = right.abs()
        max_abs = float(diff.amax())
        rel = diff / ref
        max_rel = float(rel.amax())
        if math.isnan(max_rel):  # 0/0 where both sides are exactly 0: no error there
            max_rel = float(rel.nan_to_num_(nan=0.0, posinf=math.inf).amax())
        worst = float(diff.div_(ref.mul_(rtol).add_(atol)).amax())
        if not worst <= 1:  # NaN included
            return False
        found.append((side, max_abs, max_rel, worst))
    for side, max_abs, max_rel, worst in found:
        side.max_abs = max(side.max_abs, max_abs)
        side.max_rel = max(side.max_rel, max_rel)
        side.max_violation = max(side.max_violation, worst)
    k = max(range(len(found)), key=lambda j: found[j][3])
    if tally.lazy is None or found[k][3] > tally.lazy[0]:
        tally.lazy = (found[k][3], start, k)  # where is found only if it is the pair's worst
    return True


def _locate_lazy(judged: _Flat, data: PairData, tally: Tally) -> None:
    """Finds the element of the worst passing block that the fast path did not locate."""
    if tally.lazy is None or tally.failed:
        return
    worst, start, k = tally.lazy
    side = tally.sides[k]
    block = judged.block(start, start + BLOCK_ELEMENTS).values
    atol, rtol = data.tolerance(side.left, side.right)
    right = block[side.right]
    over = torch.sub(block[side.left], right).abs_().div_(right.abs().mul_(rtol).add_(atol))
    tally.top_key.append(torch.tensor([worst], dtype=torch.float64))
    tally.top_index.append(torch.tensor([start + int(over.argmax())]))
    tally.top_failed.append(torch.tensor([False]))


def _failing(flat: _Flat, start: int, failed: torch.Tensor, at: torch.Tensor, tally: Tally, detail_limit: int) -> None:
    """Tallies a block's failing elements (`at`): where, kinks, and the ratios between sides."""
    values = flat.values
    if tally.failed < detail_limit:
        tally.failed_at.append(at[: detail_limit - tally.failed] + start)
    tally.failed += at.numel()
    if flat.kink is not None:
        tally.kinks += int((flat.kink & failed).sum())
    if flat.smooth is not None:
        tally.smooth += int((flat.smooth & failed).sum())
    for key, invalid in flat.invalid.items():
        tally.invalid[key] = tally.invalid.get(key, 0) + int((invalid & failed).sum())
    for blame, (top_name, bottom_name) in _RATIOS.items():
        if top_name not in values:
            continue
        top, bottom = values[top_name][failed], values[bottom_name][failed]
        usable = bool((bottom.abs() > 1e-12).all()) and bool(top.isfinite().all())
        tally.ratio_usable[blame] = tally.ratio_usable.get(blame, True) and usable
        if usable:
            ratio = top / bottom
            tally.ratio_low[blame] = min(tally.ratio_low.get(blame, math.inf), float(ratio.min()))
            tally.ratio_high[blame] = max(tally.ratio_high.get(blame, -math.inf), float(ratio.max()))


# For each blame, the ratio that says by what factor the blamed side is off.
_RATIOS = {"expected": ("e", "a"), "autograd": ("a", "n"), "numerical": ("n", "a"), "shared": ("a", "n")}


def _pair_report(data: PairData, flat: _Flat, tally: Tally, small: bool, detail_limit: int) -> PairReport:
    values = flat.values
    shape = tuple(data.output_shape) + tuple(data.input_shape)
    comparisons = tuple(Comparison(s.name, s.failed == 0, s.max_abs, s.max_rel, s.failed) for s in tally.sides)
    blame = blame_of(tally)
    worst = tuple(_element(flat, shape, k, data, tally) for k in _ranked(tally))
    failed_at = torch.cat(tally.failed_at)[:detail_limit].tolist() if tally.failed_at else []
    e = values.get("e")
    tested_atol, tested_rtol = data.tolerance("a", "n")
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
        worst=worst[0] if worst else _empty_element(data),
        worst_elements=worst,
        comparisons=comparisons,
        failed=tuple(failed_at),
        kink_count=tally.kinks,
        autograd=_listed(values["a"]) if small else None,
        numerical=_listed(values["n"]) if small else None,
        expected=_listed(e) if (small and e is not None) else None,
        error=_listed(torch.cat(tally.error)) if (small and tally.error) else (() if small else None),
        failed_mask=tuple(torch.cat(tally.mask).tolist()) if (small and tally.mask) else (() if small else None),
        constant_ratio=constant_ratio(tally, blame),
        nonfinite=tuple((_SIDE_NAMES[k], n) for k, n in sorted(tally.nonfinite.items(), key=_side_order)),
        check=data.check,
        sides=data.sides,
        kinks_accepted=max(0, tally.accepted),
        atol=tested_atol,
        rtol=tested_rtol,
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


def _ranked(tally: Tally) -> list[int]:
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


def _element(flat: _Flat, shape: tuple[int, ...], k: int, data: PairData, tally: Tally) -> Element:
    values, accepted = flat.values, flat.accepted
    at = {name: float(v[k]) for name, v in values.items()}
    diffs, rels, failed = [], [], False
    for side in tally.sides:
        left, right = at[side.left], at[side.right]
        atol, rtol = data.tolerance(side.left, side.right)
        diff = abs(left - right)
        diff = math.inf if math.isnan(diff) else diff
        diffs.append(diff)
        rels.append(diff / abs(right) if right != 0 else (0.0 if diff == 0 else math.inf))
        failed = failed or not diff <= atol + rtol * abs(right)
    index = _unravel(k, shape)
    split = len(data.output_shape)
    return Element(
        index=index,
        autograd=at["a"],
        numerical=at["n"],
        expected=at.get("e"),
        abs_error=max(diffs),
        rel_error=max(rels),
        failed=failed and not (accepted is not None and bool(accepted[k])),
        output_element=index[:split],
        input_element=index[split:],
    )


def _empty_element(data: PairData) -> Element:
    nan = float("nan")
    out, inp = tuple(0 for _ in data.output_shape), tuple(0 for _ in data.input_shape)
    return Element(out + inp, nan, nan, None, 0.0, 0.0, False, out, inp)


def _unravel(k: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    index = []
    for size in reversed(shape):
        index.append(k % size)
        k //= size
    return tuple(reversed(index))
