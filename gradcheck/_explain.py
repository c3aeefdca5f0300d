"""The sentences a failing pair gets: who is likely wrong, in the words of what the pair checks."""

from __future__ import annotations

from gradcheck.report import Blame, Check, PairReport, Report

__all__ = ["verdict", "explain", "ratio_sides", "SHARED_MISTAKE"]

SHARED_MISTAKE = (
    "your derivation and the backward agree with each other but not with finite differences: they may share one mistake"
)
# What the side under test is called, by check: in a shared mistake, and in verdicts.
_SHARING = {
    Check.REV: "backward",
    Check.FWD: "jvp",
    Check.REV2: "double backward",
    Check.REV2_U: "double backward",
    Check.HVP: "double backward",
}
_TESTED = {
    Check.REV: "autograd (backward)",
    Check.FWD: "forward mode (jvp)",
    Check.REV2: "double backward",
    Check.REV2_U: "double backward",
    Check.HVP: "Hessian-vector product",
}


def verdict(pair: PairReport) -> str:
    """The verdict column of the pair table."""
    if pair.passed:
        return f"ok ({pair.kinks_accepted} kink(s) accepted)" if pair.kinks_accepted else "ok"
    third = "reverse mode" if pair.sides[2] == "reverse" else "expected (hand derivation)"
    return {
        Blame.EXPECTED: f"FAIL: {third} likely wrong",
        Blame.AUTOGRAD: f"FAIL: {_TESTED[pair.check]} likely wrong",
        Blame.NUMERICAL: "FAIL: finite differences unreliable here",
        Blame.SHARED: (
            "FAIL: forward and reverse mode may share a mistake"
            if pair.sides[2] == "reverse"
            else f"FAIL: derivation and {_SHARING[pair.check]} may share a mistake"
        ),
        Blame.ROUNDING: "INCONCLUSIVE: low-precision rounding",
        Blame.UNCLEAR: "FAIL: all three sides disagree",
        Blame.NONFINITE: "FAIL: NaN/Inf values",
        Blame.DETACHED: "DIFFER: part of fn runs under no_grad (neither side wrong)",
    }[pair.blame]


def ratio_sides(pair: PairReport) -> tuple[str, str] | None:
    """Which two value columns the ratio column divides, by blame: (blamed side, reference)."""
    a, n, e = pair.sides
    return {
        Blame.EXPECTED: (e, a),
        Blame.AUTOGRAD: (a, n),
        Blame.NUMERICAL: (n, a),
        Blame.SHARED: (a, n),
    }.get(pair.blame)


def explain(report: Report, pair: PairReport) -> str:
    """Why the pair failed and what to do, in one or two sentences."""
    blame = pair.blame
    if blame == Blame.EXPECTED:
        return _explain_third(pair)
    if blame == Blame.AUTOGRAD:
        return _explain_tested(report, pair)
    if blame == Blame.SHARED:
        return _explain_shared(pair)
    if blame == Blame.ROUNDING:
        return (
            f"inconclusive: {_TESTED[pair.check]} in {report.autograd_dtype} differs from finite differences "
            f"by more than {report.autograd_dtype} rounding allows here (atol={pair.atol:.2g}, "
            f"rtol={pair.rtol:.2g}), but the same function's {_TESTED[pair.check]} run in float64 agrees "
            "with them: its formula is right, and the difference is rounding in the low-precision dtype "
            "(cancellation, as in 1 - tanh^2 near |x| = 3). Loosen atol/rtol for this dtype, or check in "
            "float32/float64."
        )
    if blame == Blame.NUMERICAL:
        return _explain_numerical(report, pair)
    if blame == Blame.NONFINITE:
        return _explain_nonfinite(report, pair)
    if blame == Blame.DETACHED:
        return (
            "fn computes part of this output from the input under torch.no_grad() or torch.inference_mode(): "
            "finite differences re-run fn and include that part, autograd does not, so the two differ "
            "without either being wrong (see the notes for the calls). Move the computation out of the "
            "block to check its gradient."
        )
    return (
        "all three sides disagree with each other: fix the side you trust least first, or "
        "check at another point (a kink or too coarse a precision can mislead finite differences)."
    )


def _explain_shared(pair: PairReport) -> str:
    """Two derivatives agree with each other, and smooth, settled finite differences do not."""
    tested = _SHARING[pair.check]
    smooth = (
        f"Finite differences are smooth here (no kink; steps eps and 2 eps agree far better than they "
        f"disagree with the {tested}) and the gap is far above their rounding floor"
    )
    if pair.sides[2] == "reverse":
        return (
            "forward mode (jvp) and reverse mode (the backward) agree with each other but not with finite "
            f"differences: they may share one mistake, a jvp and a backward derived the same wrong way. {smooth}: "
            "re-derive both by hand, independently of their code."
        )
    if pair.check == Check.REV:
        return f"{SHARED_MISTAKE}. {smooth}: re-derive by hand, independently of the backward's code."
    first = pair.check == Check.FWD
    return (
        f"your derivation{'' if first else ' (the hand Hessian)'} and the {tested} agree with each other but "
        f"not with finite differences{'' if first else ' of the gradient'}: they may share one mistake. "
        f"{smooth}: re-derive by hand, independently of the {tested}'s code."
    )


def _explain_third(pair: PairReport) -> str:
    a, _, e = pair.sides
    if e == "reverse":
        return (
            "reverse mode (the backward) disagrees with forward mode and finite differences, which agree "
            "with each other: see the backward's own (rev) row."
        )
    tested = "autograd" if a == "autograd" else a
    return (
        f"the hand derivation (expected) is likely wrong: it disagrees with both {tested} and "
        "finite differences, which agree with each other."
    )


def _explain_tested(report: Report, pair: PairReport) -> str:
    if pair.kink_count == pair.failed_count:
        return (
            f"{_TESTED[pair.check]} gives a value outside the one-sided slopes at a kink of the "
            "function (neither side's slope, nor between them): it is likely wrong there."
        )
    if pair.check == Check.FWD:
        third = "reverse mode" if pair.sides[2] == "reverse" else "your expected gradient"
        return (
            f"forward mode (jvp) is likely wrong: it disagrees with finite differences and {third}. "
            "Check the jvp (or forward-mode formula) of any custom autograd.Function on this path."
        )
    if pair.check in (Check.REV2, Check.REV2_U, Check.HVP):
        return (
            f"the {_TESTED[pair.check]} disagrees with finite differences of the gradient: the "
            "backward is right at first order but its own derivative is wrong. Check that the "
            "backward of any custom autograd.Function is itself differentiable (torch ops on "
            "saved tensors, no .detach() or numpy) and that its double backward is right."
        )
    if report.has_expected:
        return (
            "the backward (autograd) is likely wrong: it disagrees with both finite differences "
            "and your expected gradient, which agree with each other. Check the backward of any "
            "custom autograd.Function on this path."
        )
    return (
        "autograd disagrees with finite differences: the backward is likely wrong (a custom "
        "autograd.Function's backward, or a .detach() or in-place op hiding a path), unless "
        "the function is not smooth at this point."
    )


def _explain_numerical(report: Report, pair: PairReport) -> str:
    if pair.kink_count:
        accept = "" if report.kinks != "fail" else " (kinks='warn' or 'pass' accepts a valid one-sided gradient)"
        return (
            f"finite differences cannot be trusted at {pair.kink_count} failing element(s): the "
            "function has a kink there (its one-sided slopes differ, as relu or abs at 0), so it "
            f"has no single derivative and autograd picks one side. Check at a point away from it{accept}."
        )
    if report.precision_floor > report.atol and pair.max_abs_error <= 10 * report.precision_floor:
        return (
            f"the disagreement is within the rounding floor of finite differences in "
            f"{report.numerical_dtype} (about {report.precision_floor:.2g}): likely rounding, "
            "not a wrong gradient (see the precision note below)."
        )
    tested = "autograd" if pair.sides[0] == "autograd" else pair.sides[0]
    return (
        f"{tested} and the {pair.sides[2]} gradient agree, but finite differences do not, and they "
        f"change with the step (eps={report.eps:g} against 2 eps): eps is too large or too small "
        "for this function here; try another eps."
    )


_NAMES = {"expected": "expected", "autograd": "autograd", "numerical": "finite differences"}


def _explain_nonfinite(report: Report, pair: PairReport) -> str:
    where = ", ".join(f"{_NAMES[side]} at {n} element(s)" for side, n in pair.nonfinite)
    numerical_only = [side for side, _ in pair.nonfinite] == ["numerical"]
    fix = (
        "finite differences went through a NaN/Inf input (see the notes), or x +- eps "
        f"overflowed or left the function's domain: lower eps (now {report.eps:g})"
        if numerical_only
        else "the function or its gradient is not finite at this point (NaN inputs, log(0), "
        "0/0, overflow): check at a point where it is finite"
    )
    return f"NaN or Inf values from {where}: nothing can be compared there; {fix}."
