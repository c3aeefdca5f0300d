"""The web page: type tensors and an expression, or open a saved graph; see the autograd graph, values,
gradients and a gradient check.

Run it with `make run` or `graphviz-app serve`. Everything it shows comes
from library calls (graphviz_app.web.service runs them in the isolated
worker); this script only lays the page out.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from functools import partial

import streamlit as st

from graphviz_app.web import compare_view, present, service, upload, urlstate
from graphviz_app.web.check_panel import DEFAULT_TOLERANCES, TOLERANCE_NAMES, check_panel
from graphviz_app.web.failures import show_failure
from graphviz_app.web.gallery import EXAMPLES, example, example_for
from graphviz_app.web.links import current_state, link_warnings, sync_url
from graphviz_app.web.page_work import analyze, available_devices, cached, compare_programs, my_runner, open_saved
from graphviz_app.web.pair import SavedPair
from graphviz_app.web.result_view import results, values
from graphviz_app.web.results import Analysis, Failure
from graphviz_app.web.urlstate import Options
from graphviz_app.web.widgets import program_editor

__all__ = ["main"]

RANKDIR_LABELS = {"TB": "top to bottom", "LR": "left to right", "BT": "bottom to top", "RL": "right to left"}


# UI state: the submitted program and the widgets' values, seeded from the URL --
def start_session(devices: tuple[str, ...]) -> None:
    """Seed a new session's UI state from the link it was opened with."""
    s = st.session_state
    if "submitted" in s:
        return
    state, problems = urlstate.from_query(st.query_params.to_dict())
    o = state.options
    if o.device not in devices:
        problems.append(f"ignored ?device={o.device}: this machine offers {', '.join(devices)}")
        o = replace(o, device="cpu")
    s.update(
        submitted=state.program, editor_text=state.program, editor_rev=0,
        url_problems=problems, opt_device=o.device, opt_dtype=o.dtype, opt_saved=o.show_saved,
        opt_attrs=o.show_attrs, opt_rankdir=o.rankdir, opt_max_nodes=o.max_nodes,
        opt_gradients=o.show_gradients, opt_depth=o.module_depth, opt_roll=o.roll,
        check_wrt=state.check.wrt, check_expected=state.check.expected, link_wrt=state.check.wrt,
        check_forward=False, check_second=False, check_kinks="fail",
        expanded=state.expanded, view=state.view, showing="program",
        **compare_view.seeded(state.compare, state.compare_view),
        **{f"tol_{name}": value for name, value in zip(TOLERANCE_NAMES, DEFAULT_TOLERANCES, strict=True)},
    )


def load_example(key: str) -> None:
    """Put a gallery example in the editor and show its graph."""
    s, ex = st.session_state, example(key)
    s.update(submitted=ex.program, editor_text=ex.program, editor_rev=s.editor_rev + 1,
             check_wrt=ex.wrt, check_expected="", showing="program")
    for key in ("check_wrt", "check_expected"):
        s.pop(f"w_{key}", None)


# The page ---------------------------------------------------------------------
def sidebar(devices: tuple[str, ...]) -> Options:
    """The options: device, dtype, what to show, layout direction, node limit."""
    with st.sidebar:
        st.header("Options")
        device = st.selectbox("Device", devices, key="opt_device",
                              help="Where tensor constructors put tensors that name no device.")
        if len(devices) == 1:
            st.caption("No CUDA device here (torch.cuda.device_count() is 0): only cpu is offered.")
        dtype = st.selectbox("Default dtype", urlstate.DTYPES, key="opt_dtype",
                             help="The floating dtype of tensors that name none.")
        saved = st.checkbox("Show saved tensors", key="opt_saved",
                            help="The tensors each op keeps for its backward.")
        attrs = st.checkbox("Show op attributes", key="opt_attrs", help="dim, alpha, exponent, …")
        gradients = st.checkbox(
            "Show gradients", key="opt_gradients",
            help="Replay backward: colour edges by gradient size and mark where NaN/Inf first appears.",
        )
        rankdir = st.selectbox("Layout direction", urlstate.RANKDIRS, key="opt_rankdir",
                               format_func=RANKDIR_LABELS.__getitem__)
        low, high = urlstate.MAX_NODES_RANGE
        max_nodes = st.number_input("Node limit", low, high, step=100, key="opt_max_nodes",
                                    help="Tracing stops past this many nodes; the graph is marked truncated.")
        low, high = urlstate.MODULE_DEPTH_RANGE
        depth = st.number_input("Module depth", low, high, step=1, key="opt_depth",
                                help="For graphs with nn modules: the graph opens with modules deeper than this "
                                     "as closed boxes (1: each module variable is a box); 0 lets the viewer pick "
                                     "the deepest level that stays readable. Click a box to open it.")
        roll = st.checkbox("Roll repeats", key="opt_roll",
                           help="Fold consecutive identical modules (layers.0–5) into one box marked ×k.")
    return Options(device=device, dtype=dtype, show_saved=saved, show_attrs=attrs,
                   rankdir=rankdir, max_nodes=int(max_nodes), show_gradients=gradients,
                   module_depth=int(depth), roll=roll)


def gallery() -> None:
    """One button per example."""
    st.caption("Examples: load one with a click")
    columns = st.columns(3)
    for i, ex in enumerate(EXAMPLES):
        columns[i % 3].button(ex.title, key=f"example-{ex.key}", help=ex.blurb, width="stretch",
                              on_click=load_example, args=(ex.key,))


def editor() -> tuple[bool, Failure | None]:
    """The program editor, its live parse check and Run.

    Returns whether Run was asked for, and the problem shown under the editor
    when the editor holds the submitted program (the results need not repeat it).
    """
    s = st.session_state
    event = program_editor(s.editor_text, key=f"editor-{s.editor_rev}")
    problem = service.syntax_problem(event.text)
    if problem is not None:
        show_failure(problem, title="Will not run")
    else:
        st.caption("✓ The program parses. Run it to see the graph.")
    run = st.button("Run", type="primary", key="run") or event.run
    if run:
        s.submitted, s.showing = event.text, "program"
    shown = example_for(s.submitted)
    if shown is not None:
        st.info(present.md(shown.blurb))
    return bool(run), (problem if event.text == s.submitted else None)


def open_saved_box() -> None:
    """Open a saved graph: a `.json` written by `save(graph, "g.json")`, shown instead of the program's graph;
    then, beside it, a second one to compare it with in synced panes."""
    def uploaded() -> None:
        s = st.session_state
        s.showing = "upload" if s.get("upload") is not None else "program"

    st.file_uploader(
        f'Open a saved graph: a .json written by save(graph, "g.json") (at most {upload.MAX_UPLOAD_MB} MB)',
        type=["json"], key="upload", max_upload_size=upload.MAX_UPLOAD_MB, on_change=uploaded,
        help="Your own model's graph: trace it with graphviz_app and save it as JSON. The file is read as "
             "data (never run) and checked; Run shows the program's graph again.")
    if st.session_state.get("upload") is None:
        return  # a second file is compared with the first: its box appears once the first is open
    st.file_uploader(
        "Compare it with a second saved graph (.json): both side by side in synced panes",
        type=["json"], key="upload_b", max_upload_size=upload.MAX_UPLOAD_MB, on_change=uploaded,
        help="Nodes aligned by diff(): panning, zooming, opening a box and selecting act on both panes; "
             "added, removed and changed nodes are coloured. Read as data, like the first file.")


def saved_graph(options: Options) -> Analysis | Failure | None:
    """The uploaded graph when the page shows it, else None."""
    s = st.session_state
    file = s.get("upload")
    if s.get("showing") != "upload" or file is None:
        return None
    refusal = upload.too_big(file.size, file.name)  # before reading it
    if refusal is not None:
        return Failure(refusal, kind="input")
    return open_saved(file.getvalue(), file.name, options)


def saved_pair(options: Options) -> SavedPair | Failure | None:
    """The two uploaded graphs aligned for the synced panes, when a second file is uploaded beside the first."""
    s = st.session_state
    first, second = s.get("upload"), s.get("upload_b")
    if s.get("showing") != "upload" or first is None or second is None:
        return None
    for file in (first, second):
        refusal = upload.too_big(file.size, file.name)  # before reading it
        if refusal is not None:
            return Failure(refusal, kind="input")
    data_a, data_b = first.getvalue(), second.getvalue()
    key = ("pair", hashlib.sha256(data_a).hexdigest(), first.name, hashlib.sha256(data_b).hexdigest(), second.name,
           options.rankdir)
    return cached(key, "Comparing the saved graphs…", lambda: service.compare_saved(
        my_runner(), data_a, first.name, data_b, second.name, options))


def main() -> None:
    """The page, top to bottom."""
    st.set_page_config(page_title="graphviz-app: autograd graphs", page_icon="🕸️", layout="wide")
    devices = available_devices()
    start_session(devices)
    options = sidebar(devices)
    st.title("See, and check, PyTorch's autograd graph")
    link_warnings(options)
    gallery()
    # The editor beside the program's values; the graph below them at the page's full width.
    left, right = st.columns([3, 2], gap="large")
    with left:
        run, problem = editor()
        problem_b = compare_view.second_editor(run)
        open_saved_box()
    saved = saved_graph(options)
    pair = saved_pair(options)
    # Transient failures (busy, time-out, a killed worker) are never cached, so
    # pressing Run again, or the next visitor, runs the program again.
    result = analyze(st.session_state.submitted, options) if saved is None else None
    with right:
        values(result)
    if result is None and pair is not None:
        compare_view.panes(pair, what="saved graphs", retry="upload the files again")
    elif result is None and saved is not None:
        results(saved, options, saved=True)
    elif result is not None and not compare_view.programs(
            result, options, analyze=analyze, compare=partial(compare_programs, options=options),
            link=lambda: urlstate.share_query(current_state(options)), shown=(problem, problem_b)):
        results(result, options, shown=problem)
    st.divider()
    if result is not None:
        check_panel(result, options)
    sync_url(options)


# Streamlit runs this script as __main__; the worker processes the runner
# starts import it again as __mp_main__, where nothing must be drawn.
if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # noqa: BLE001 - the page shows a message, never a traceback
        st.error(present.md(
            f"Something went wrong drawing this page ({type(e).__name__}: {e}). This is a bug in "
            "graphviz-app; please report it. Change the program or reload the page to go on."
        ))
