"""The random-probe screen of one unit: v^T J u by autograd against central differences along u.

All differentiated inputs and parameters move together along each ±1 direction u_b, so a unit
with a million parameters costs 2k + 2 evaluations and k backward passes. As in `gradcheck`'s
screen, an element whose error exceeds the tolerance escapes all k x k probes with probability
about 2^(1-k). Along a direction whose probe misses, `gradcheck`'s kink test (steps of ±h and
±2h) finds the output elements at a corner; the probe compared again without them passes under
`kinks="pass"`. `narrowing.narrow` then finds the input (or parameter) and the element that are wrong.
"""

from __future__ import annotations

import dataclasses

import torch

from gradcheck.probes import probe_steps

from .modes import check_forward, check_second
from .probed import Float64Failed, NotCheckable, Options, Outcome, Probed, compare
from .units import BudgetSpent, Unit

__all__ = ["Float64Failed", "NotCheckable", "Options", "Outcome", "screen"]


# How far a unit's inputs move off a kink for the second look (x + KINK_SHIFT (1 + |x|) r, |r| in 0.5..1.5).
KINK_SHIFT = 1e-4


def screen(unit: Unit, opts: Options, *, shift: float = 0.0) -> Outcome:
    """Screen `unit`'s backward; raises NotCheckable, or BudgetSpent when the budget runs out.

    `shift` > 0 screens it at its inputs moved by `shift` (1 + |x|) in random signs instead (off a kink).
    """
    p = Probed(unit, opts)
    if shift:
        p.shift(shift)
    p.setup()
    try:
        parts = p.autograd_parts()
    except BudgetSpent:
        raise
    except RuntimeError as e:
        reason = f"backward raised {type(e).__name__}: {str(e).splitlines()[0]}"
        if unit.dtype == torch.float64:  # perhaps a float32-only backward: run.check tries float32
            raise Float64Failed(f"its {reason} in float64 copies") from e
        return Outcome(False, reason=reason)
    k, h = p.k, p.h
    plus = torch.stack([p.along(b, h) for b in range(k)], dim=1)
    minus = torch.stack([p.along(b, -h) for b in range(k)], dim=1)
    numerical = (plus - minus) / (2 * h)
    autograd = parts.sum(0)
    outcome = compare(autograd, numerical, p, opts)
    outcome.parts = parts
    outcome.notes.extend(p.notes)
    if not outcome.passed and outcome.reason is None:
        _kinks(outcome, autograd, numerical, p, opts)
        p.outs = []  # frees the graph kept for the kink test's backward passes
        if outcome.passed and not shift:
            _off_kink(outcome, unit, opts)
    p.outs = []
    outcome.checks.append("rev")
    if unit.dtype != torch.float64:
        if "fwd" in opts.modes or opts.order == 2:
            outcome.notes.append("forward mode and double backward are not checked in float32 (rev only)")
        return outcome
    if outcome.passed and "fwd" in opts.modes:
        check_forward(outcome, numerical, p, opts)
    if outcome.passed and opts.order == 2:
        check_second(outcome, p, opts)
    return outcome

def _off_kink(out: Outcome, unit: Unit, opts: Options) -> None:
    """A unit accepted at kinks is screened again at inputs moved off them, as finite differences need.

    At the step's own point the kinked outputs were judged only against their one-sided slopes;
    moved by KINK_SHIFT (1 + |x|) in random signs (far beyond the step h, so the differences stay
    on one side), the same probes judge the backward near the corner too: a backward wrong just
    beside a kink fails here.
    """
    again = screen(unit, dataclasses.replace(opts, modes=("rev",), order=1), shift=KINK_SHIFT)
    where = f"re-checked at inputs moved off the kink by about {KINK_SHIFT:g} x (1 + |x|), in random signs"
    if again.passed:
        crossed = any("crossed a kink" in n for n in again.notes)
        out.notes.append(f"{where}: passed" + (", though it crossed other kinks there" if crossed else ""))
        return
    if again.reason is not None:
        found = again.reason
    elif again.ratio is not None:
        found = f"backward is {again.ratio:.3g} x finite differences"
    else:
        found = f"backward differs from finite differences by {again.abs_error:.2g} (relative {again.rel_error:.2g})"
    out.passed = False
    out.reason = f"off the kink ({where}): {found}"
    out.abs_error, out.rel_error, out.ratio = again.abs_error, again.rel_error, again.ratio


def _kinks(out: Outcome, autograd: torch.Tensor, numerical: torch.Tensor, p: Probed, opts: Options) -> None:
    """Probes that missed only through outputs at a kink pass under kinks="pass"; the outcome says so.

    A probe sums many elements, and at several kinks at once (max-pool's ties after a ReLU) no
    pair of one-sided slopes bounds the sum. So each missing direction u_b is stepped again at
    ±h and ±2h, and `gradcheck`'s kink test finds, output element by output element, where
    the function has a corner along u_b; the missing probes are compared again without those
    outputs (one more backward pass each). What still misses is a wrong backward.

    At the kinked outputs themselves finite differences give no derivative, only the slopes
    from either side; a backward there must lie between them (a subgradient: ReLU's 0 at 0 does).
    So the kinked part of each missing probe is also computed by autograd (one backward pass)
    and held against the one-sided slopes summed with the probe's signs: outside them the
    backward is wrong at the kink itself (a bug no central difference sees), else the
    verdict says the point is a kink and what was and was not judged there.
    """
    gap = (autograd - numerical).abs()
    bad = gap > out.tol
    masked = 0
    worst_cut = 0.0  # how far the kinked part of a probe lies outside the one-sided slopes
    for b in [int(c) for c in bad.any(0).nonzero().reshape(-1)]:
        direction = [u[b].reshape(x.shape).to(x) for x, u in zip(p.xs, p.u, strict=True)]
        steps = [p.run([x + f * p.h * d for x, d in zip(p.xs, direction, strict=True)])
                 for f in (1.0, -1.0, 2.0, -2.0)]
        kinks, central, sides = [], [], []
        for o, y0 in enumerate(p.y0):
            column = [s[o].reshape(-1, 1).cpu().double() for s in steps]
            base = y0.reshape(-1, 1).cpu().double()
            sides.append((((column[0] - base) / p.h).reshape(-1), ((base - column[1]) / p.h).reshape(-1)))
            kink, _, _, _ = probe_steps(tuple(column), y0.reshape(-1, 1).cpu().double(), h=p.h,  # type: ignore[arg-type]
                                        floor=p.floor, atol=p.atol, rtol=p.rtol, tested={"a": column[0]})
            kinks.append(kink.reshape(-1))
            central.append(((column[0] - column[1]) / (2 * p.h)).reshape(-1))
        if not any(bool(k.any()) for k in kinks):
            return  # smooth along u_b: the miss is the backward's
        masked += int(sum(int(k.sum()) for k in kinks))
        for a in [int(r) for r in bad[:, b].nonzero().reshape(-1)]:
            weights = [v[a] * ~k for v, k in zip(p.v, kinks, strict=True)]
            fd = sum(float(w @ c) for w, c in zip(weights, central, strict=True))
            ag = p.backward_along(weights, b)
            if abs(ag - fd) > out.tol:
                return
            at_kink = [v[a] * k for v, k in zip(p.v, kinks, strict=True)]
            low = high = 0.0
            for w, (right, left) in zip(at_kink, sides, strict=True):
                low += float(torch.minimum(w * right, w * left).sum())
                high += float(torch.maximum(w * right, w * left).sum())
            ag_kink = p.backward_along(at_kink, b)
            worst_cut = max(worst_cut, low - ag_kink, ag_kink - high)
    if worst_cut > out.tol:
        out.reason = (f"at a kink: where the step's point sits on a corner ({masked} output element(s) over the "
                      f"probes that missed; ReLU at 0, max-pool ties, abs at 0), autograd lies {worst_cut:.3g} outside "
                      "the slopes finite differences find on either side: no subgradient")
        out.ratio = None
        return
    if opts.kinks == "fail":
        out.notes.append(f"the failing probes cross kinks at {masked} output element(s) and agree without them: "
                         "pass kinks='pass' to accept that")
        return
    out.passed = True
    out.ratio = None
    out.notes.append(f"{int(bad.sum())} probe(s) crossed a kink (ReLU at 0, max-pool ties, abs at 0) at {masked} "
                     f"output element(s) and agree without them: passed under kinks={opts.kinks!r}. At those elements "
                     "finite differences give no derivative, so at the step's own point the check is inconclusive "
                     "there: it saw only that the backward lies between the slopes on either side")
