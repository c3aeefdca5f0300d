"""Turn job results into what the page shows: tables, a verdict, a heatmap grid; no Streamlit."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import altair as alt
import pandas as pd

from .results import Analysis, GradientCheck, TensorValue

__all__ = [
    "Verdict",
    "values_table",
    "module_table",
    "verdict",
    "element_table",
    "highlight_failures",
    "error_grid",
    "error_heatmap",
    "pairs_of",
    "analysis_caption",
    "nonfinite_mark",
    "md",
    "STATIC_TABLE_ROWS",
]

STATIC_TABLE_ROWS = 60  # longer tables scroll (st.dataframe) instead of filling the page

_SIDE = {"expected": "your gradient", "autograd": "autograd", "numerical": "finite differences"}
# Which two sides a failing pair's constant ratio divides, by blame (as gradcheck's report).
_RATIO_SIDES = {
    "expected": ("expected", "autograd"),
    "autograd": ("autograd", "numerical"),
    "numerical": ("numerical", "autograd"),
    "shared": ("autograd", "numerical"),
}
_BLAME = {
    "expected": "your hand derivation is likely wrong: autograd and finite differences agree with each other",
    "autograd": "the backward (autograd) is likely wrong: finite differences and your gradient agree with each other",
    "numerical": "finite differences are unreliable here (a kink, or too little precision)",
    "shared": "your derivation and the backward agree with each other but not with finite differences: they may "
    "share one mistake (finite differences are smooth and settled here, far above their rounding)",
    "rounding": "inconclusive: the difference is low-precision rounding; the same derivative in float64 agrees",
    "unclear": "all three sides disagree with each other",
    "nonfinite": "a side gives NaN or Inf, so nothing can be compared there",
    "reverse": "reverse mode (the backward) is likely wrong: forward mode and finite differences agree with each "
    "other",
    "detached": "part of the program runs under torch.no_grad() or torch.inference_mode(): finite differences "
    "re-run it and include that part, autograd does not, so they differ without either being wrong",
}
# What each kind of check tests, for headlines about a failing pair that is not reverse mode.
_TESTED = {
    "fwd": "Forward mode (jvp) is wrong",
    "rev2": "The double backward is wrong: the backward is right, its own derivative is not",
    "rev2-u": "The double backward is wrong: the backward is right, its own derivative is not",
    "hvp": "The Hessian-vector product is wrong: the backward is right, its own derivative is not",
}
_CHECKED = {
    "gradient of the sum": " (checked as the gradient of the output's sum, what the .grad table shows)",
    "Jacobian": " (checked as the output's full Jacobian)",
}


_MARKDOWN_SPECIALS = set("\\`*_{}[]()<>#+-.!|~$:")


def md(text: str) -> str:
    r"""`text` escaped so Streamlit's Markdown shows it as typed.

    Programs and messages are full of `*`, `_` and `__`; unescaped they turn
    into italics and bold (`2*(x+2)*3` would lose its stars).

    >>> print(md("x.__class__ * 2"))
    x\.\_\_class\_\_ \* 2
    """
    return "".join("\\" + c if c in _MARKDOWN_SPECIALS else c for c in text)


@dataclass(frozen=True, slots=True)
class Verdict:
    """The gradient check in one headline and one explanation."""

    passed: bool
    headline: str
    detail: str


_NONFINITE = re.compile(r"(?<![\w.])(-?inf|nan)(?![\w.])")


def nonfinite_mark(text: str) -> str:
    """A warning naming the NaN/Inf values numpy printed in `text`, or "" when there are none.

    >>> nonfinite_mark("[1.0000,    nan, -inf]")
    '⚠ NaN, -Inf: '
    """
    found = {m.group(1) for m in _NONFINITE.finditer(text)}
    names = [name for key, name in (("nan", "NaN"), ("inf", "Inf"), ("-inf", "-Inf")) if key in found]
    return "⚠ " + ", ".join(names) + ": " if names else ""


def values_table(values: tuple[TensorValue, ...]) -> pd.DataFrame:
    """One row per tensor: name, shape, dtype, device, values (on one line), NaN/Inf marked."""
    return pd.DataFrame(
        [(v.name, v.shape, v.dtype, v.device, nonfinite_mark(v.text) + " ".join(v.text.split())) for v in values],
        columns=["tensor", "shape", "dtype", "device", "values"],
    )


def module_table(rows: tuple[tuple[str, ...], ...]) -> pd.DataFrame:
    """The module summary: one row per module, in `named_modules()` order."""
    return pd.DataFrame(list(rows), columns=["module", "type", "ops", "activations", "params", "param bytes"])


def pairs_of(check: GradientCheck) -> list[dict[str, Any]]:
    """The report's (output, input) pairs, failing ones first."""
    return sorted(check.report.get("pairs", []), key=lambda p: bool(p["passed"]))


def verdict(check: GradientCheck) -> Verdict:
    """Say whether the hand gradient is right, and if not who is wrong and by what factor."""
    wrt = check.wrt
    checked = _CHECKED.get(check.checked, "")
    if check.passed:
        accepted = sum(int(p.get("kinks_accepted", 0)) for p in check.report.get("pairs", []))
        kinks = (
            f", apart from {accepted} element(s) at a kink of the function, where your gradient and autograd's "
            "are valid one-sided gradients" if accepted else ""
        )
        more = [name for key, name in (("fwd", "forward mode"), ("rev2", "second order")) if _has_check(check, key)]
        extra = f" {' and '.join(more).capitalize()} agree too." if more else ""
        where = (
            "in random probes v^T J u of the whole Jacobian (an element off by more than atol would have "
            "failed one with probability over 99.9998%)"
            if check.report.get("mode") == "screened"
            else "at every element"
        )
        return Verdict(
            True,
            f"Your gradient d(output)/d{wrt} = {check.expected} is right",
            f"It agrees with autograd and with finite differences {where}{kinks}{checked}.{extra}",
        )
    memory = check.report.get("memory", {}).get("out_of_memory")
    if memory:
        return Verdict(False, "The check did not finish: out of memory", str(memory))
    pair = pairs_of(check)[0]
    blame = pair["blame"]
    names = _side_names(pair)
    headline = {
        "expected": f"Your gradient d(output)/d{wrt} = {check.expected} is wrong",
        "autograd": f"The backward is wrong: autograd's d(output)/d{wrt} disagrees",
        "shared": f"Your gradient d(output)/d{wrt} = {check.expected} and the backward may share one mistake",
        "rounding": f"Inconclusive: autograd's d(output)/d{wrt} differs only by low-precision rounding",
        "detached": f"d(output)/d{wrt} differs because part of the program runs under no_grad: neither side is wrong",
    }.get(blame, f"The gradients of d(output)/d{wrt} disagree")
    if pair.get("check", "rev") in _TESTED and blame == "autograd":
        headline = _TESTED[pair["check"]]
    detail = f"{pair['failed_count']} of {pair['numel']} elements fail; {_BLAME.get(blame, blame)}{checked}."
    ratio = pair.get("constant_ratio")
    if ratio is not None and blame in _RATIO_SIDES:
        side, ref = _RATIO_SIDES[blame]
        headline += f": it is {_factor(ratio)} × {names[ref]}'s" if side == "expected" else (
            f": {names[side]} is {_factor(ratio)} × {names[ref]}"
        )
        detail += (
            f" {names[side].capitalize()} = {_factor(ratio)} × {names[ref]} at every failing element: "
            "a constant factor is off, e.g. a missing or extra 1/n of a mean, or the 2 of a square."
        )
    return Verdict(False, headline, detail)


def _has_check(check: GradientCheck, kind: str) -> bool:
    return any(p.get("check") == kind for p in check.report.get("pairs", []))


def _side_names(pair: dict[str, Any]) -> dict[str, str]:
    """The page's names of a pair's three value columns (forward mode's pairs name theirs)."""
    tested, _, third = pair.get("sides", ("autograd", "numerical", "expected"))
    return {
        "autograd": _SIDE.get(tested, tested),
        "numerical": _SIDE["numerical"],
        "expected": _SIDE.get(third, third),
    }


def _factor(ratio: Any) -> str:
    """A ratio as people say it: 3, 0.5, 1/3."""
    value = float(ratio)
    if value != 0 and abs(1 / value - round(1 / value)) < 1e-6 and abs(value) < 1:
        return f"1/{round(1 / value)}"
    return f"{value:.6g}"


def element_table(pair: dict[str, Any], *, wrt: str, has_expected: bool) -> pd.DataFrame | None:
    """Every Jacobian element of one pair: autograd, finite differences, yours, failed.

    The first column names the element: `x[2]` for a scalar output, else
    `output[1] / x[2]`. Returns None when the report kept no per-element
    detail (too large).
    """
    if pair.get("autograd") is None:
        return None
    out_shape, in_shape = tuple(pair["output_shape"]), tuple(pair["input_shape"])
    rows = []
    for flat in range(int(pair["numel"])):
        row = {
            "element": _element_name(flat, out_shape, in_shape, wrt),
            "autograd": _num(pair["autograd"][flat]),
            "finite differences": _num(pair["numerical"][flat]),
        }
        if has_expected and pair.get("expected") is not None:
            row["yours"] = _num(pair["expected"][flat])
        row["error"] = _num(pair["error"][flat])
        row["failed"] = bool(pair["failed_mask"][flat])
        rows.append(row)
    return pd.DataFrame(rows)


def highlight_failures(table: pd.DataFrame) -> Any:
    """A pandas Styler that paints failing rows red and writes NaN/Inf as "⚠ NaN" (st.dataframe shows it)."""
    def paint(row: pd.Series) -> list[str]:
        style = "background-color: #ffd7d7; color: #8a0000" if row["failed"] else ""
        return [style] * len(row)

    numbers = [c for c in table.columns if c not in ("element", "failed")]
    return table.style.apply(paint, axis=1).format(_number, subset=numbers)


def _number(value: Any) -> str:
    """Six decimals; a non-finite value marked so it cannot pass for a number."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "⚠ NaN"
    if isinstance(value, float) and math.isinf(value):
        return "⚠ Inf" if value > 0 else "⚠ -Inf"
    return f"{value:.6f}"


def error_grid(pair: dict[str, Any], *, wrt: str) -> pd.DataFrame | None:
    """The per-element error as (row, col, error, failed) for a heatmap.

    Only for Jacobians bigger than a vector (two dimensions of size > 1);
    rows are output elements, columns input elements (for a scalar output,
    the input's own rows and columns, its leading dimensions flattened).
    `grid.attrs` holds the axis titles. None otherwise or without detail.
    """
    if pair.get("error") is None:
        return None
    out_shape, in_shape = tuple(pair["output_shape"]), tuple(pair["input_shape"])
    if sum(1 for d in out_shape + in_shape if d > 1) < 2:
        return None
    if _numel(out_shape) == 1:
        cols = in_shape[-1] if in_shape else 1
        titles = {"rows": f"row of {wrt}", "cols": f"column of {wrt}"}
    else:
        cols = _numel(in_shape)
        titles = {"rows": "output element", "cols": f"element of {wrt}"}
    errors, failed = pair["error"], pair["failed_mask"]
    grid = pd.DataFrame(
        {
            "row": [i // cols for i in range(len(errors))],
            "col": [i % cols for i in range(len(errors))],
            "error": [_num(e) for e in errors],
            "failed": [bool(f) for f in failed],
        }
    )
    grid.attrs.update(titles)
    return grid


def error_heatmap(grid: pd.DataFrame) -> alt.Chart:
    """A heatmap of `error_grid`: darker is a larger error, failing cells outlined."""
    base = alt.Chart(grid).encode(
        x=alt.X("col:O", title=grid.attrs.get("cols", "column")),
        y=alt.Y("row:O", title=grid.attrs.get("rows", "row")),
        tooltip=["row", "col", alt.Tooltip("error:Q", format=".3g"), "failed"],
    )
    cells = base.mark_rect().encode(
        color=alt.Color("error:Q", scale=alt.Scale(scheme="reds"), title="error"),
    )
    outline = base.transform_filter("datum.failed").mark_rect(
        fillOpacity=0, stroke="#1f3b73", strokeWidth=2
    )
    return (cells + outline).properties(height=alt.Step(28), width=alt.Step(28))


def _element_name(flat: int, out_shape: tuple[int, ...], in_shape: tuple[int, ...], wrt: str) -> str:
    out_i, in_i = divmod(flat, _numel(in_shape))
    name = wrt + _index(in_i, in_shape)
    return name if _numel(out_shape) == 1 else f"output{_index(out_i, out_shape)} / {name}"


def _index(flat: int, shape: tuple[int, ...]) -> str:
    if not shape:
        return ""
    parts = []
    for size in reversed(shape):
        flat, i = divmod(flat, size)
        parts.append(i)
    return "[" + ", ".join(str(i) for i in reversed(parts)) + "]"


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _num(value: Any) -> float:
    """The report writes non-finite floats as strings; the tables want floats."""
    return float(value) if value is not None else float("nan")


def analysis_caption(analysis: Analysis) -> str:
    """The one-line summary under the graph, with the time it took (and the file, for a saved graph)."""
    source = f"{analysis.source} (saved graph): " if analysis.source else ""
    return f"{source}{analysis.summary} · {analysis.seconds * 1e3:.0f} ms"
