"""The readable text of a Report: a verdict line, a table of pairs, the failing elements."""

from __future__ import annotations

from collections.abc import Sequence

from gradcheck.report import Blame, PairReport, Report

__all__ = ["format_report", "table"]

_VERDICT = {
    Blame.NONE: "ok",
    Blame.EXPECTED: "FAIL: expected (hand derivation) likely wrong",
    Blame.AUTOGRAD: "FAIL: autograd (backward) likely wrong",
    Blame.NUMERICAL: "FAIL: finite differences unreliable here",
    Blame.UNCLEAR: "FAIL: all three sides disagree",
    Blame.NONFINITE: "FAIL: NaN/Inf values",
}

# For each blame: which two sides the ratio column divides, and their display names.
_RATIO_SIDES = {
    Blame.EXPECTED: ("expected", "autograd"),
    Blame.AUTOGRAD: ("autograd", "numerical"),
    Blame.NUMERICAL: ("numerical", "autograd"),
}
_NAMES = {"expected": "expected", "autograd": "autograd", "numerical": "finite differences"}


def table(header: Sequence[str], rows: Sequence[Sequence[str]], indent: str = "  ") -> list[str]:
    """Left-aligned columns, two spaces apart."""
    widths = [max(len(r[k]) for r in [header, *rows]) for k in range(len(header))]
    return [
        (indent + "  ".join(cell.ljust(w) for cell, w in zip(row, widths))).rstrip()
        for row in [header, *rows]
    ]


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.7g}"


def _shape(shape: Sequence[int]) -> str:
    return f"({shape[0]},)" if len(shape) == 1 else "(" + ", ".join(map(str, shape)) + ")"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def format_report(report: Report) -> str:
    """The whole report as text a person understands at a glance."""
    lines = [_headline(report), _settings(report)]
    if report.memory.out_of_memory:
        lines += ["", "  " + report.memory.out_of_memory]
    if report.pairs:
        lines += [""] + _pair_table(report)
    for pair in report.failed_pairs:
        lines += [""] + _pair_detail(report, pair)
    if report.notes:
        lines += ["", "notes:"] + [f"  - {note}" for note in report.notes]
    t = report.timings
    lines += [
        "",
        f"time: {_ms(t.total_s)} (autograd {_ms(t.autograd_s)}, finite differences "
        f"{_ms(t.numerical_s)}, expected {_ms(t.expected_s)}, compare {_ms(t.compare_s)})",
    ]
    return "\n".join(lines)


def _headline(report: Report) -> str:
    n = len(report.pairs)
    if report.memory.out_of_memory:
        return "gradcheck DID NOT FINISH: out of memory"
    if report.passed:
        worst = max((p.max_abs_error for p in report.pairs), default=0.0)
        return f"gradcheck passed: {n} (output, input) pair(s) agree, max abs error {worst:.2g}"
    return f"gradcheck FAILED: {len(report.failed_pairs)} of {n} (output, input) pair(s) disagree"


def _settings(report: Report) -> str:
    r = report
    expected = f"; expected in {r.expected_dtype}" if r.has_expected else ""
    mode = ", fast mode (random projections)" if r.mode == "fast" else ""
    sides = (
        f"autograd in {r.autograd_dtype} ({r.autograd_method}); finite differences in "
        f"{r.numerical_dtype} ({r.numerical_method}, eps={r.eps:g}){expected}"
    )
    rule = f"|a - b| <= atol + rtol*|b|, with atol={r.atol:g}, rtol={r.rtol:g}"
    return f"  on {r.device}{mode}; {sides}\n  an element passes when {rule}"


def _pair_table(report: Report) -> list[str]:
    rows = [
        [
            f"{p.output_index} {_shape(_out_shape(report, p))}",
            f"{p.input_index} {_shape(_in_shape(report, p))}",
            str(p.numel),
            str(p.failed_count),
            f"{p.max_abs_error:.3g}",
            f"{p.max_rel_error:.3g}",
            _VERDICT[p.blame],
        ]
        for p in report.pairs
    ]
    header = ["output", "input", "elements", "failed", "max abs err", "max rel err", "verdict"]
    return table(header, rows, indent="")


def _out_shape(report: Report, p: PairReport) -> tuple[int, ...]:
    return next((o.shape for o in report.outputs if o.index == p.output_index), p.output_shape)


def _in_shape(report: Report, p: PairReport) -> tuple[int, ...]:
    return next((i.shape for i in report.inputs if i.index == p.input_index), p.input_shape)


def _pair_detail(report: Report, pair: PairReport) -> list[str]:
    lines = [f"output {pair.output_index}, input {pair.input_index}: {_explain(report, pair)}"]
    if pair.constant_ratio is not None and pair.blame in _RATIO_SIDES:
        side, ref = _RATIO_SIDES[pair.blame]
        lines.append(
            f"  {_NAMES[side]} = {pair.constant_ratio:.6g} x {_NAMES[ref]} at every failing "
            f"element ({pair.failed_count} of {pair.numel}): a constant factor is off, e.g. a "
            "missing or extra 1/n of a mean, or the 2 of a square."
        )
    lines += _element_table(report, pair)
    return lines


def _explain(report: Report, pair: PairReport) -> str:
    if pair.blame == Blame.EXPECTED:
        return (
            "the hand derivation (expected) is likely wrong: it disagrees with both autograd and "
            "finite differences, which agree with each other."
        )
    if pair.blame == Blame.AUTOGRAD and report.has_expected:
        return (
            "the backward (autograd) is likely wrong: it disagrees with both finite differences "
            "and your expected gradient, which agree with each other. Check the backward of any "
            "custom autograd.Function on this path."
        )
    if pair.blame == Blame.AUTOGRAD:
        return (
            "autograd disagrees with finite differences: the backward is likely wrong (a custom "
            "autograd.Function's backward, or a .detach() or in-place op hiding a path), unless "
            "the function is not smooth at this point."
        )
    if pair.blame == Blame.NUMERICAL:
        return _explain_numerical(report, pair)
    if pair.blame == Blame.NONFINITE:
        return _explain_nonfinite(report, pair)
    return (
        "all three sides disagree with each other: fix the side you trust least first, or "
        "check at another point (a kink or too coarse a precision can mislead finite differences)."
    )


def _explain_numerical(report: Report, pair: PairReport) -> str:
    if pair.kink_count:
        return (
            f"finite differences cannot be trusted at {pair.kink_count} failing element(s): the "
            "function has a kink there (its one-sided slopes differ, as relu or abs at 0), so it "
            "has no single derivative and autograd picks one side. Check at a point away from it."
        )
    if report.precision_floor > report.atol and pair.max_abs_error <= 10 * report.precision_floor:
        return (
            f"the disagreement is within the rounding floor of finite differences in "
            f"{report.numerical_dtype} (about {report.precision_floor:.2g}): likely rounding, "
            "not a wrong gradient (see the precision note below)."
        )
    return (
        "autograd and your expected gradient agree, but finite differences do not: the function "
        "may not be smooth here, or eps may be too large or too small for it."
    )


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


def _element_table(report: Report, pair: PairReport) -> list[str]:
    sides = _RATIO_SIDES.get(pair.blame)
    header = ["element", "autograd", "numerical"]
    header += ["expected"] if report.has_expected else []
    header += ["abs error"] + ([f"{sides[0]}/{sides[1]}"] if sides else []) + [""]
    rows = []
    shown = [e for e in pair.worst_elements if e.failed]
    if len(shown) == pair.failed_count:  # every failing element fits: show them in order
        shown.sort(key=lambda e: e.index)
    for e in shown:
        values = {"autograd": e.autograd, "numerical": e.numerical, "expected": e.expected}
        row = [_index(e.index, report.mode), _num(e.autograd), _num(e.numerical)]
        row += [_num(e.expected)] if report.has_expected else []
        row += [f"{e.abs_error:.3g}"]
        if sides:
            top, bottom = values[sides[0]], values[sides[1]]
            row.append(f"{top / bottom + 0.0:.4g}" if top is not None and bottom else "-")
        rows.append(row + ["FAIL"])
    lines = table(header, rows)
    if pair.failed_count > len(shown):
        lines.append(
            f"  (the {len(shown)} worst of {pair.failed_count} failing elements; "
            f"{pair.failed_count - len(shown)} more not shown)"
        )
    return lines


def _index(index: tuple[int, ...], mode: str) -> str:
    if mode == "fast":
        return "u^T J v"
    return "[" + ", ".join(map(str, index)) + "]"
