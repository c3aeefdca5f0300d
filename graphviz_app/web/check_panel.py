"""The page's "Check my gradient" panel: the variable, the hand-derived expression, tolerances, modes, the verdict."""

from __future__ import annotations

import streamlit as st

from graphviz_app.web import present
from graphviz_app.web.failures import show_failure
from graphviz_app.web.gallery import example_for
from graphviz_app.web.links import link_problem
from graphviz_app.web.page_work import check_gradient
from graphviz_app.web.results import Analysis, CheckModes, Failure, GradientCheck
from graphviz_app.web.urlstate import CheckInput, Options

__all__ = ["DEFAULT_TOLERANCES", "TOLERANCE_NAMES", "check_panel", "kept"]

TOLERANCE_NAMES = ("eps", "atol", "rtol")
DEFAULT_TOLERANCES = (1e-6, 1e-5, 1e-3)
KINK_LABELS = {"fail": "fail", "warn": "pass, with a warning", "pass": "pass, with a note"}


def kept(key: str) -> str:
    """The widget key for the UI state `key`, seeded from it.

    Streamlit forgets the value of a widget it did not draw in a run (the
    check panel is not drawn after a failed run); the value lives on under
    `key` and comes back when the widget does.
    """
    widget = f"w_{key}"
    if widget not in st.session_state:
        st.session_state[widget] = st.session_state[key]
    return widget


def check_panel(result: Analysis | Failure, options: Options) -> None:
    """Check my gradient: the variable, the hand-derived expression, the tolerances."""
    st.subheader("Check my gradient")
    if isinstance(result, Failure) or not result.leaves:
        st.caption("Run a program with a named leaf tensor (requires_grad=True) to check a gradient by hand.")
        return
    s = st.session_state
    if s.check_wrt not in result.leaves:
        if s.check_wrt and s.check_wrt == s.get("link_wrt"):
            link_problem(f"ignored ?wrt={s.check_wrt}: the program has no leaf tensor named "
                         f"{s.check_wrt} that requires grad; checking {result.leaves[0]} instead "
                         f"(choose one of {', '.join(result.leaves)} under 'With respect to')")
        s.check_wrt = result.leaves[0]
        s.pop("w_check_wrt", None)
    wrt_col, expected_col, button_col = st.columns([1, 5, 1], vertical_alignment="bottom")
    wrt = s.check_wrt = wrt_col.selectbox("With respect to", result.leaves, key=kept("check_wrt"))
    known = example_for(s.submitted)
    hint = known.hint if known is not None and known.wrt == wrt else "2*(x+2)/3 for the first example"
    expected = s.check_expected = expected_col.text_input(
        f"Your d(output)/d{present.md(wrt)}: an expression over the program's variables",
        key=kept("check_expected"), placeholder=f"e.g. {hint}")
    button_col.button("Check", key="check_run")
    with st.expander("Tolerances"):
        cols = st.columns(3)
        eps, atol, rtol = (
            col.number_input(name, format="%.0e", key=kept(f"tol_{name}"), min_value=0.0)
            for col, name in zip(cols, TOLERANCE_NAMES, strict=True)
        )
    tolerances = (eps, atol, rtol)
    for name, value in zip(TOLERANCE_NAMES, tolerances, strict=True):
        s[f"tol_{name}"] = value
    modes = check_modes()
    if not expected.strip():
        return
    st.caption("The check runs your program in float64: finite differences need the precision. For an output "
               "with several elements, give the gradient of its sum (what the .grad table shows) or its full "
               "Jacobian (the output's shape, then the variable's).")
    outcome = check_gradient(s.submitted, options, CheckInput(wrt, expected), tolerances, modes)
    if isinstance(outcome, Failure):
        show_failure(outcome, title="Could not check the gradient")
        return
    check_result(outcome)


def check_modes() -> CheckModes:
    """What to check besides reverse mode at first order, and what a kink does."""
    s = st.session_state
    with st.expander("What to check"):
        forward = s.check_forward = st.checkbox(
            "Forward mode (jvp) too", key=kept("check_forward"),
            help="Also build the Jacobian by forward mode and compare it with finite differences and the backward.")
        second = s.check_second = st.checkbox(
            "Second order too", key=kept("check_second"),
            help="Also check the gradient's own derivatives: double backward and Hessian-vector products.")
        kinks = s.check_kinks = st.radio(
            "At a kink (relu at 0)", tuple(KINK_LABELS), key=kept("check_kinks"), horizontal=True,
            format_func=KINK_LABELS.__getitem__,
            help="Where the function has a corner and each gradient is a valid one-sided or sub-gradient: fail "
                 "the check, pass it with a warning, or pass it with a note in the report.")
    return CheckModes(forward=bool(forward), order=2 if second else 1, kinks=str(kinks))


def check_result(check: GradientCheck) -> None:
    """The verdict, the per-element table, the error heatmap, the full report."""
    verdict = present.verdict(check)
    (st.success if verdict.passed else st.error)(f"**{present.md(verdict.headline)}.** {present.md(verdict.detail)}")
    for warning in check.warnings:
        st.warning(present.md(warning))
    for pair in present.pairs_of(check):
        table = present.element_table(pair, wrt=check.wrt, has_expected=True)
        if table is not None and len(table) <= present.STATIC_TABLE_ROWS:
            st.table(present.highlight_failures(table), hide_index=True)
        elif table is not None:
            st.dataframe(present.highlight_failures(table), hide_index=True)
        grid = present.error_grid(pair, wrt=check.wrt)
        if grid is not None:
            st.markdown("**Error per Jacobian element** (largest difference between the sides; failing ones outlined)")
            st.altair_chart(present.error_heatmap(grid))
    with st.expander("The checker's full report"):
        st.code(check.text, language=None)
