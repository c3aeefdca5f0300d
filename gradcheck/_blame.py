"""Which side of a failing pair to blame, from what the comparison blocks add up to."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from gradcheck.report import Blame

__all__ = ["SideStats", "Tally", "blame_of", "constant_ratio"]


@dataclass(slots=True)
class SideStats:
    """One comparison `left ~ right` (side keys "a", "n", "e") over the blocks so far."""

    name: str
    left: str
    right: str
    failed: int = 0
    failed_off_kink: int = 0  # failures at elements that are not kinks
    max_abs: float = 0.0
    max_rel: float = 0.0
    max_violation: float = 0.0


@dataclass(slots=True)
class Tally:
    """What the blocks add up to: failures, what the probes said of them, the worst elements."""

    sides: list[SideStats]
    failed: int = 0
    kinks: int = 0  # failing elements at a kink
    smooth: int = 0  # failing elements where finite differences are to be believed
    invalid: dict[str, int] = field(default_factory=dict)  # side key -> failing kinks it is outside of
    accepted: int = 0  # elements that failed only at a verified kink, accepted by kinks="warn"/"pass"
    failed_at: list[torch.Tensor] = field(default_factory=list)
    top_key: list[torch.Tensor] = field(default_factory=list)
    top_index: list[torch.Tensor] = field(default_factory=list)
    top_failed: list[torch.Tensor] = field(default_factory=list)
    lazy: tuple[float, int, int] | None = None  # (violation, block start, side) of the worst fast block
    ratio_low: dict[str, float] = field(default_factory=dict)
    ratio_high: dict[str, float] = field(default_factory=dict)
    ratio_usable: dict[str, bool] = field(default_factory=dict)
    error: list[torch.Tensor] = field(default_factory=list)
    mask: list[torch.Tensor] = field(default_factory=list)
    nonfinite: dict[str, int] = field(default_factory=dict)  # side key -> NaN/Inf elements


def blame_of(tally: Tally) -> str:
    """The blame of a pair: none when it passed, else the side most likely wrong."""
    if tally.nonfinite:
        return Blame.NONFINITE
    if not tally.failed:
        return Blame.NONE
    if tally.kinks == tally.failed:
        return _at_kinks(tally)
    blame = _off_kinks(tally)
    if tally.kinks and _at_kinks(tally) not in (Blame.NUMERICAL, blame):
        return Blame.UNCLEAR  # the kinks point at another side than the rest
    return blame


def _off_kinks(tally: Tally) -> str:
    """The blame from the failing elements that are not at a kink."""
    flags = {s.left + s.right: s.failed_off_kink > 0 for s in tally.sides}
    worst = {s.left + s.right: s.max_violation for s in tally.sides}
    an = flags["an"]
    if len(tally.sides) == 1:
        return Blame.AUTOGRAD
    ea, en = flags["ea"], flags["en"]
    if ea and en and not an:
        return Blame.EXPECTED
    if an and ea and not en:
        return Blame.AUTOGRAD
    if an and en and not ea:
        # autograd and the third opinion agree: finite differences are wrong, unless
        # they are smooth and settled at every failing element, and then the two
        # others likely share one mistake.
        return Blame.SHARED if tally.smooth == tally.failed - tally.kinks else Blame.NUMERICAL
    if an and ea and en:
        return Blame.UNCLEAR
    # One comparison fails alone: blame the side farther from the third one.
    if ea:
        return Blame.EXPECTED if worst["en"] >= worst["an"] else Blame.AUTOGRAD
    if an:
        return Blame.AUTOGRAD if worst["ea"] >= worst["en"] else Blame.NUMERICAL
    return Blame.EXPECTED if worst["ea"] >= worst["an"] else Blame.NUMERICAL


def _at_kinks(tally: Tally) -> str:
    """Every failing element is at a kink: a side outside the one-sided slopes is wrong."""
    wrong_a, wrong_e = tally.invalid.get("a", 0) > 0, tally.invalid.get("e", 0) > 0
    if wrong_a and wrong_e:
        return Blame.UNCLEAR
    if wrong_a:
        return Blame.AUTOGRAD
    if wrong_e:
        return Blame.EXPECTED
    return Blame.NUMERICAL


def constant_ratio(tally: Tally, blame: str) -> float | None:
    """The factor by which the blamed side is off, when it is the same at every failing element."""
    if tally.failed < 2 or not tally.ratio_usable.get(blame, False):
        return None  # one element is always "off by a constant factor": say nothing
    low, high = tally.ratio_low[blame], tally.ratio_high[blame]
    mid = (low + high) / 2
    if mid == 0 or high - low > 1e-3 * max(abs(low), abs(high)) or not math.isfinite(mid):
        return None
    return mid
