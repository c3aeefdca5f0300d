"""The readable text of a Report: a verdict line, a table of pairs, the failing elements."""

from __future__ import annotations

from collections.abc import Sequence

from gradcheck._explain import explain, ratio_sides, verdict
from gradcheck.report import Check, PairReport, Report, set_text_formatter

__all__ = ["format_report", "table"]

def table(header: Sequence[str], rows: Sequence[Sequence[str]], indent: str = "  ") -> list[str]:
    """Left-aligned columns, two spaces apart."""
    widths = [max(len(r[k]) for r in [header, *rows]) for k in range(len(header))]
    return [
        (indent + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True))).rstrip()
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
        f"{_ms(t.numerical_s)}, expected {_ms(t.expected_s)}, compare {_ms(t.compare_s)}"
        + (f", forward mode {_ms(t.forward_s)}" if report.forward_method else "")
        + (f", second order {_ms(t.second_order_s)}" if report.order == 2 else "")
        + ")",
    ]
    return "\n".join(lines)


def _headline(report: Report) -> str:
    n = len(report.pairs)
    if report.memory.out_of_memory:
        return "gradcheck DID NOT FINISH: out of memory"
    if report.inconclusive:
        return (
            f"gradcheck INCONCLUSIVE: {len(report.failed_pairs)} of {n} (output, input) pair(s) differ "
            f"only by {report.autograd_dtype} rounding; the same derivatives in float64 agree"
        )
    if report.passed:
        worst = max((p.max_abs_error for p in report.pairs), default=0.0)
        kinks = f" apart from {report.kinks_accepted} element(s) at an accepted kink" if report.kinks_accepted else ""
        return f"gradcheck passed: {n} (output, input) pair(s) agree{kinks}, max abs error {worst:.2g}"
    return f"gradcheck FAILED: {len(report.failed_pairs)} of {n} (output, input) pair(s) disagree"


def _settings(report: Report) -> str:
    r = report
    expected = f"; expected in {r.expected_dtype}" if r.has_expected else ""
    mode = {"fast": ", fast mode (random projections)", "screened": ", screened (random ±1 probes v^T J u)"}.get(
        r.mode, ""
    )
    sides = (
        f"autograd in {r.autograd_dtype} ({r.autograd_method}); finite differences in "
        f"{r.numerical_dtype} ({r.numerical_method}, eps={r.eps:g}){expected}"
    )
    if r.forward_method:
        sides += f"; forward mode ({r.forward_method})"
    if r.order == 2:
        sides += f"; second order: double backward, Hessian-vector products by {r.hvp_method}"
    rule = f"|a - b| <= atol + rtol*|b|, with atol={r.atol:g}, rtol={r.rtol:g}"
    wider = sorted({(p.atol, p.rtol) for p in r.pairs if (p.atol, p.rtol) > (r.atol, r.rtol)})
    if wider:
        rule += f" (atol={wider[-1][0]:.2g}, rtol={wider[-1][1]:.2g} against {r.autograd_dtype} autograd)"
    kinks = f"; kinks={r.kinks!r}" if r.kinks != "fail" else ""
    if r.mode == "screened":
        return (
            f"  on {r.device}{mode}; {sides}\n  a probe passes when |a - b| <= atol={r.atol:g} + the rounding of "
            f"its finite difference; had one not (at a second step too), every element would have been compared "
            f"where affordable ({rule}){kinks}"
        )
    return f"  on {r.device}{mode}; {sides}\n  an element passes when {rule}{kinks}"


def _pair_table(report: Report) -> list[str]:
    several = any(p.check != Check.REV for p in report.pairs)
    rows = [
        ([p.check] if several else [])
        + [
            f"{_out_label(p)}{p.output_index} {_shape(_out_shape(report, p))}",
            f"{'u ' if p.check == Check.REV2_U else ''}{p.input_index} {_shape(_in_shape(report, p))}",
            str(p.numel),
            str(p.failed_count),
            f"{p.max_abs_error:.3g}",
            f"{p.max_rel_error:.3g}",
            verdict(p),
        ]
        for p in report.pairs
    ]
    header = ["output", "input", "elements", "failed", "max abs err", "max rel err", "verdict"]
    lines = table((["check"] if several else []) + header, rows, indent="")
    if report.order == 2:
        lines.append(
            "(rev2, hvp: grad i is the gradient of input i, differentiated by input j; rev2-u: by u j, "
            "the weights of output j that the gradient is taken of, i.e. the backward's grad_output)"
        )
    return lines


_SECOND = (Check.REV2, Check.REV2_U, Check.HVP)


def _out_label(p: PairReport) -> str:
    return "grad " if p.check in _SECOND else ""


def _out_shape(report: Report, p: PairReport) -> tuple[int, ...]:
    if p.check in _SECOND:
        return p.output_shape
    return next((o.shape for o in report.outputs if o.index == p.output_index), p.output_shape)


def _in_shape(report: Report, p: PairReport) -> tuple[int, ...]:
    if p.check == Check.REV2_U:
        return p.input_shape
    return next((i.shape for i in report.inputs if i.index == p.input_index), p.input_shape)


def _pair_detail(report: Report, pair: PairReport) -> list[str]:
    what = "" if pair.check == Check.REV else f"{pair.check}, "
    out = "gradient of input" if pair.check in _SECOND else "output"
    by = "weights of output" if pair.check == Check.REV2_U else "input"
    lines = [f"{what}{out} {pair.output_index}, {by} {pair.input_index}: {explain(report, pair)}"]
    sides = ratio_sides(pair)
    if pair.constant_ratio is not None and sides is not None:
        side, ref = (_name(s) for s in sides)
        lines.append(
            f"  {side} = {pair.constant_ratio:.6g} x {ref} at every failing "
            f"element ({pair.failed_count} of {pair.numel}): a constant factor is off, e.g. a "
            "missing or extra 1/n of a mean, or the 2 of a square."
        )
    lines += _element_table(report, pair)
    return lines


def _name(side: str) -> str:
    return "finite differences" if side == "numerical" else side


def _element_table(report: Report, pair: PairReport) -> list[str]:
    sides = ratio_sides(pair)
    a, n, e = pair.sides
    header = ["element", a, n]
    header += [e] if pair.expected is not None or any(x.expected is not None for x in pair.worst_elements) else []
    has_third = len(header) == 4
    header += ["abs error"] + ([f"{sides[0]}/{sides[1]}"] if sides else []) + [""]
    rows = []
    shown = [x for x in pair.worst_elements if x.failed]
    if len(shown) == pair.failed_count:  # every failing element fits: show them in order
        shown.sort(key=lambda x: x.index)
    for x in shown:
        values = {a: x.autograd, n: x.numerical, e: x.expected}
        row = [_index(x.output_element, x.input_element, pair, report.mode), _num(x.autograd), _num(x.numerical)]
        row += [_num(x.expected)] if has_third else []
        row += [f"{x.abs_error:.3g}"]
        if sides:
            top, bottom = values[sides[0]], values[sides[1]]
            row.append(f"{top / bottom + 0.0:.4g}" if top is not None and bottom else "-")
        rows.append(row + ["FAIL"])
    scalar = pair.check in (Check.REV, Check.FWD) and not pair.output_shape
    lines = [f"  {_index_key(pair, report.mode)}"] if rows and not scalar and report.mode != "fast" else []
    lines += table(header, rows)
    if pair.failed_count > len(shown):
        lines.append(
            f"  (the {len(shown)} worst of {pair.failed_count} failing elements; "
            f"{pair.failed_count - len(shown)} more not shown)"
        )
    return lines


def _index(out: tuple[int, ...], inp: tuple[int, ...], pair: PairReport, mode: str) -> str:
    if mode == "fast":
        return "u^T J v"
    where = "grad" if pair.check in _SECOND else "out"
    parts = [] if not out and pair.check != Check.HVP else [f"{where}[{', '.join(map(str, out))}]"]
    if pair.check != Check.HVP:
        parts.append(f"{'u' if pair.check == Check.REV2_U else 'in'}[{', '.join(map(str, inp))}]")
    return " ".join(parts)


def _index_key(pair: PairReport, mode: str) -> str:
    if mode == "fast":
        return "element: the projection u^T J v of the whole Jacobian"
    if pair.check == Check.HVP:
        return f"element: grad[k] is element k of (H v) for the gradient of input {pair.output_index}"
    if pair.check == Check.REV2_U:
        return (
            f"element: grad[...] the element of input {pair.output_index}'s gradient, u[...] the element "
            f"of output {pair.input_index}'s weights"
        )
    out = (
        f"grad[...] the element of input {pair.output_index}'s gradient, "
        if pair.check == Check.REV2
        else ("" if not pair.output_shape else f"out[...] the element of output {pair.output_index}, ")
    )
    return f"element: {out}in[...] the element of input {pair.input_index}"


set_text_formatter(format_report)
