"""The page's compare parts: a second program run beside the first, and two graphs in synced panes."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from functools import partial

import streamlit as st

from ..errors import RenderError
from ..viewer.compare import compare_page
from . import present, service
from .failures import show_failure
from .pair import SavedPair
from .results import Analysis, Failure
from .urlstate import MAX_URL_PROGRAM_CHARS, Options
from .widgets import compare_viewer, graph_viewer, program_editor

__all__ = ["PROGRAM_LABELS", "seeded", "second_editor", "second_program", "pair_view", "programs", "second_alone",
           "panes"]

PROGRAM_LABELS = ("program", "second program")  # the panes' names when two programs are compared


def seeded(compare: str, view: str = "") -> dict[str, object]:
    """The session state a new session starts with, from its link's second program (`?compare=`, "" for none)
    and the panes' view (`?compare_view=`)."""
    return {"compare_on": bool(compare), "compare_text": compare, "compare_submitted": compare, "compare_rev": 0,
            "compare_view": view if compare else ""}


def second_editor(run: bool) -> Failure | None:
    """The switch "Compare with a second program" and, when on, its editor (it starts as a copy of the first).

    `run`: Run was pressed; it runs both programs, Ctrl+Enter in this editor the second. Returns the
    problem shown under this editor when it holds the submitted second program (not repeated below).
    """
    s = st.session_state
    on = st.toggle("Compare with a second program", key="compare_on",
                   help="Run a second program in the same workers and show both graphs side by side in synced "
                        "panes, nodes aligned by diff(): what was added, removed or changed (x**2 against x**3).")
    if not on:
        s.compare_submitted = ""
        return None
    if not s.compare_text:
        s.compare_text = s.submitted
    event = program_editor(s.compare_text, key=f"editor-b-{s.compare_rev}",
                           label="Second program: compared with the first, side by side", testid="program-editor-b")
    problem = service.syntax_problem(event.text)
    if problem is not None:
        show_failure(problem, title="The second program will not run")
    if run or event.run:
        s.compare_submitted, s.compare_text, s.showing = event.text, event.text, "program"
    return problem if event.text == s.compare_submitted else None


def second_program() -> str:
    """The second program submitted, when the switch is on; "" for none."""
    s = st.session_state
    return str(s.get("compare_submitted") or "") if s.get("compare_on") else ""


def pair_view() -> str:
    """The program pair's panes' view (the first pane's fragment) for the page's link; "" for none."""
    return str(st.session_state.get("compare_view") or "") if second_program() else ""


def programs(first: Analysis | Failure, options: Options, *, analyze: Callable[[str, Options], Analysis | Failure],
             compare: Callable[[Analysis, Analysis], SavedPair | Failure], link: Callable[[], str],
             shown: tuple[Failure | None, Failure | None]) -> bool:
    """The first program's graph beside the second's in synced panes, or each side's problem above the graph of
    the side that ran; False when the page is to show the first program's graph alone: no second program is
    submitted, or it failed (its problem is then shown here, above where that graph goes).

    `analyze` runs a program in the page's workers (cached); `compare` aligns two graphs there;
    `link` gives the query of a link to the page as shown (asked once the panes have said their view);
    `shown` the problems already shown under each editor.
    """
    other = second_program()
    if not other:
        return False
    second = analyze(other, options)
    for side, found, problem in (("first", first, shown[0]), ("second", second, shown[1])):
        if not isinstance(found, Failure):
            continue
        if problem is not None and (problem.message, problem.line) == (found.message, found.line):
            st.caption(f"No graph for the {side} program: fix the problem shown under its editor, then Run.")
        else:
            show_failure(found, title=f"The {side} program could not run")
    if isinstance(second, Failure):
        return isinstance(first, Failure)  # the first's graph, if it ran, shows below as a single graph
    if isinstance(first, Failure):
        second_alone(second)
        return True
    if panes(compare(first, second), what="two programs", retry="press Run to try again", keep_view=True):
        st.markdown(f"[Link to this comparison](?{link()})")
        chars = len(st.session_state.submitted) + len(other)
        if chars > MAX_URL_PROGRAM_CHARS:
            st.caption(present.md(f"The two programs are too long for one link ({chars:,} characters together; a "
                                  f"link holds at most {MAX_URL_PROGRAM_CHARS:,}): the link leaves the second out."))
    return True


def second_alone(result: Analysis) -> None:
    """The second program's graph by itself, as the page shows one graph, when the first could not run."""
    try:
        graph_viewer(result.viewer, key="graph-b-" + hashlib.blake2b(result.viewer.encode(), digest_size=6).hexdigest())
    except RenderError as e:
        st.error(present.md(str(e)))
        return
    st.caption(present.md("The second program's graph (the first could not run): " + present.analysis_caption(result)))
    for note in result.notes:
        st.info(present.md(note))


def panes(pair: SavedPair | Failure, *, what: str, retry: str, keep_view: bool = False) -> bool:
    """Two graphs side by side in synced panes, the diff's summary and the panes as a file; whether they show.

    `keep_view`: the panes open on the session's `compare_view` (a link's) and keep the view the person
    makes there for the page's link, as the single graph keeps its own; a new pair starts afresh.
    """
    if isinstance(pair, Failure):
        show_failure(pair, title=f"Could not compare the {what}", retry=retry)
        return False
    s = st.session_state
    digest = hashlib.blake2b(pair.viewer.encode(), digest_size=8).hexdigest()
    if keep_view and s.get("compare_mounted", ("",))[0] != digest:  # what the panes open on, fixed while shown
        if s.get("compare_mounted") is not None:  # not the first pair, which the link's view is for
            s.compare_view = ""
        s.compare_mounted = (digest, s.get("compare_view") or "")
    try:
        view = compare_viewer(pair.viewer, fragment=s.compare_mounted[1] if keep_view else "",
                              key="compare-" + digest[:12])
    except RenderError as e:
        st.error(present.md(str(e)))
        return False
    if keep_view and view is not None:
        s.compare_view = view
    st.caption(present.md(f"{pair.labels[0]} ({pair.node_counts[0]:,} nodes) ⟷ {pair.labels[1]} "
                          f"({pair.node_counts[1]:,} nodes): {pair.summary}"))
    st.download_button("The panes as one HTML file", partial(compare_page, pair.viewer,
                                                             title=f"{pair.labels[0]} ⟷ {pair.labels[1]}"),
                       "compare.html", "text/html", on_click="ignore", key="compare-download",
                       help="The same synced panes as a self-contained file: opens in any browser, makes no request.")
    return True
