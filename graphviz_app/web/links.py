"""The page's link: the address bar kept a link to what is shown, and what a link opened got wrong."""

from __future__ import annotations

import streamlit as st

from graphviz_app.web import compare_view, present, urlstate
from graphviz_app.web.urlstate import CheckInput, Options, PageState

__all__ = ["current_state", "link_problem", "link_warnings", "sync_url", "too_long_for_link"]


def link_warnings(options: Options) -> None:
    """What the link got wrong, while the page still shows what the link opened.

    Not on every rerun of the session: once the person runs another program or
    changes an option, the warnings are about a page no longer shown. (Not just
    the first run either: the editor's first report reruns the page at once.)
    """
    s = st.session_state
    if not s.get("url_problems"):
        return
    opened = s.setdefault("url_opened", (s.submitted, options))
    if (s.submitted, options) != opened:
        s.url_problems = []
        return
    for problem in s.url_problems:
        st.warning(present.md(f"From the link: {problem}."))


def link_problem(problem: str) -> None:
    """A problem with the link found while drawing: shown here, and kept with the others."""
    s = st.session_state
    s.link_wrt = None  # reported once; the person's own choices are never "from the link"
    s.setdefault("url_problems", []).append(problem)
    st.warning(present.md(f"From the link: {problem}."))


def current_state(options: Options) -> PageState:
    """What a link to the page as shown must hold (the program's graph: a saved graph stays on the page)."""
    s = st.session_state
    return PageState(program=s.submitted, options=options,
                     check=CheckInput(s.get("check_wrt") or "", s.get("check_expected") or ""),
                     expanded=tuple(s.get("expanded") or ()), view=s.get("view") or "",
                     compare=compare_view.second_program(), compare_view=compare_view.pair_view())


def sync_url(options: Options) -> None:
    """Keep the address bar a link to what the page shows."""
    query = urlstate.to_query(current_state(options))
    if st.query_params.to_dict() != query:
        st.query_params.from_dict(query)


def too_long_for_link() -> str | None:
    """Why the link and the address bar leave the program out, or None."""
    chars = len(st.session_state.submitted)
    if chars <= urlstate.MAX_URL_PROGRAM_CHARS:
        return None
    return (f"This program is too long for a link ({chars:,} characters; a link holds at most "
            f"{urlstate.MAX_URL_PROGRAM_CHARS:,}): the link and the address bar keep the options only, "
            "and the program stays on this page. Copy it from the editor to share it")
