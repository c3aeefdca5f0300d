"""The web page: type tensors and an expression, or open a saved graph; see the autograd graph, values,
gradients and a gradient check.

Run it with `make run` or `graphviz-app serve`. Everything it shows comes
from library calls (graphviz_app.web.service runs them in the isolated
worker); this script only lays the page out.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Hashable
from dataclasses import replace
from functools import partial
from typing import TypeVar

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from graphviz_app.errors import RenderError
from graphviz_app.web import compare_view, present, service, upload, urlstate
from graphviz_app.web.cache import ResultCache
from graphviz_app.web.failures import show_failure
from graphviz_app.web.fairness import FairRunner, SessionRunner
from graphviz_app.web.gallery import EXAMPLES, example, example_for
from graphviz_app.web.pair import SavedPair
from graphviz_app.web.results import Analysis, CheckModes, Failure, GradientCheck
from graphviz_app.web.urlstate import CheckInput, Options, PageState
from graphviz_app.web.widgets import graph_viewer, program_editor

__all__ = ["main"]

RANKDIR_LABELS = {"TB": "top to bottom", "LR": "left to right", "BT": "bottom to top", "RL": "right to left"}
TOLERANCE_NAMES = ("eps", "atol", "rtol")
KINK_LABELS = {"fail": "fail", "warn": "pass, with a warning", "pass": "pass, with a note"}
STATIC_TABLE_ROWS = 60  # longer element tables scroll (st.dataframe) instead of filling the page
DEFAULT_TOLERANCES = (1e-6, 1e-5, 1e-3)
# Graphviz lays out about 1,500 nodes in a second here, 5,000 in 5 to 13 s (benchmarks/README.md,
# web view section): above this the page warns that an SVG or PNG download may not finish.
PICTURE_NODES = 3000
T = TypeVar("T")


# Shared, cached work ---------------------------------------------------------
@st.cache_resource(show_spinner="Starting the worker processes…")
def runner() -> FairRunner:
    """The worker processes every program runs in, shared fairly by all sessions."""
    return FairRunner(service.page_runner())


@st.cache_resource(show_spinner=False)
def results_cache() -> ResultCache:
    """Results shared by all sessions, bounded by bytes and age.

    Not st.cache_data: that stores whatever the function returns, so one
    visitor's "all workers are busy" was served to every later visitor of the
    same link; this one keeps successes and the program's own errors only.
    """
    return ResultCache()


def my_runner(*, interruptible: bool = True) -> SessionRunner:
    """This session's share of the workers.

    `interruptible`: a newer press of Run ends the wait for the running job at
    once (Streamlit raises its rerun exception at the next session-state read,
    `newer_run_point`); the job goes on, so the next run takes it up if the
    program is the same, and stops it when the program changed.
    """
    s = st.session_state
    if "session_key" not in s:
        s.session_key = uuid.uuid4().hex
    return runner().for_session(s.session_key, on_wait=newer_run_point if interruptible else None)


def newer_run_point() -> None:
    """Read the session state: where Streamlit ends this run when the person asked for a newer one."""
    if get_script_run_ctx(suppress_warning=True) is not None:  # not from a download's thread
        _ = "session_key" in st.session_state


@st.cache_resource(show_spinner=False)
def available_devices() -> tuple[str, ...]:
    """cpu and each cuda:N the workers' torch sees."""
    return service.devices(runner().for_session("server"))


def cached(key: Hashable, spinner: str, compute: Callable[[], T]) -> T:
    """`compute()` unless the shared cache holds `key`; a spinner while it runs."""
    cache = results_cache()
    found = cache.get(key)
    if found is None:
        with st.spinner(spinner):
            found = compute()
        cache.put(key, found)
    return found


def analyze(program: str, options: Options) -> Analysis | Failure:
    """The program evaluated, traced and differentiated (cached by program and options)."""
    return cached(("analysis", program, options), "Running the program…",
                  lambda: service.analyze(my_runner(), program, options))


def check_gradient(
    program: str, options: Options, check: CheckInput, tolerances: tuple[float, float, float], modes: CheckModes
) -> GradientCheck | Failure:
    """A hand-derived gradient checked (cached by program, options, gradient, tolerances and modes)."""
    return cached(("check", program, options, check, tolerances, modes), "Checking the gradient…",
                  lambda: service.check_gradient(my_runner(), program, options, check, tolerances, modes))


def open_saved(data: bytes, name: str, options: Options) -> Analysis | Failure:
    """A saved graph read in the worker (cached by the file's bytes and the options that shape its view)."""
    shaping = Options(rankdir=options.rankdir, module_depth=options.module_depth, roll=options.roll)
    key = ("saved", hashlib.sha256(data).hexdigest(), name, shaping)
    return cached(key, "Opening the saved graph…", lambda: service.open_saved(my_runner(), data, name, shaping))


def picture_key(fmt: str, graph_json: str, rankdir: str) -> tuple[str, str, str]:
    """Where the shared cache keeps a graph's SVG or PNG download (or why it cannot be drawn)."""
    return (fmt, hashlib.sha256(graph_json.encode()).hexdigest(), rankdir)


def picture(fmt: str, graph_json: str, rankdir: str, session_runner: SessionRunner) -> bytes:
    """The SVG or PNG download, laid out in the worker when it is asked for (outside any script run).

    A failure is kept in the shared cache (unless it is one of the moment), where the page finds
    it and says why beside the downloads: the browser hears only that the download failed.
    """
    job = service.png if fmt == "png" else service.svg
    found = results_cache().get_or_run(picture_key(fmt, graph_json, rankdir),
                                       lambda: job(session_runner, graph_json, rankdir))
    if isinstance(found, Failure):
        raise RuntimeError(f"could not draw the {fmt.upper()}: {found}")
    return found


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
        expanded=state.expanded, view=state.view, showing="program", **compare_view.seeded(state.compare),
        **{f"tol_{name}": value for name, value in zip(TOLERANCE_NAMES, DEFAULT_TOLERANCES, strict=True)},
    )


def load_example(key: str) -> None:
    """Put a gallery example in the editor and show its graph."""
    s, ex = st.session_state, example(key)
    s.update(submitted=ex.program, editor_text=ex.program, editor_rev=s.editor_rev + 1,
             check_wrt=ex.wrt, check_expected="", showing="program")
    for key in ("check_wrt", "check_expected"):
        s.pop(f"w_{key}", None)


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


def compare_programs(first: Analysis, second: Analysis, options: Options) -> SavedPair | Failure:
    """The two programs' graphs aligned in the worker for the synced panes (cached by both graphs and direction)."""
    key = ("programs", *(hashlib.sha256(r.graph_json.encode()).hexdigest() for r in (first, second)), options.rankdir)
    return cached(key, "Comparing the two programs…", lambda: service.compare_graphs(
        my_runner(), first.graph_json, second.graph_json, compare_view.PROGRAM_LABELS, options))


def results(result: Analysis | Failure, options: Options, *, shown: Failure | None = None,
            saved: bool = False) -> None:
    """The graph, its summary line, the downloads and the tracer's notes.

    `shown` is the problem already shown under the editor: not repeated. `saved`: the
    result is an uploaded graph's.
    """
    if isinstance(result, Failure):
        if saved:
            show_failure(result, title="Could not open the saved graph", retry="upload the file again")
        elif shown is not None and (shown.message, shown.line) == (result.message, result.line):
            st.caption("No graph: fix the problem shown under the editor, then Run.")
        else:
            show_failure(result, title="Could not draw the graph")
        return
    gradient_origin(result)
    graph_pane(result)
    st.caption(present.md(present.analysis_caption(result)))
    downloads(result, options)
    for note in result.notes:
        st.info(present.md(note))
    module_table(result)
    memory_panel(result)


def memory_panel(result: Analysis) -> None:
    """The memory of one step: the predicted peak, live bytes over the backward steps, who holds the peak."""
    key = ("memory", hashlib.sha256(result.graph_json.encode()).hexdigest())
    panel = cached(key, "Replaying backward…", lambda: service.memory(my_runner(), result.graph_json))
    with st.expander("Memory of one step", expanded=False):
        if isinstance(panel, Failure):
            st.caption(present.md(panel.message))
            return
        from graphviz_app.web import memory_view

        st.markdown(present.md(memory_view.caption(panel)))
        st.line_chart(memory_view.live_frame(panel), x_label="backward step", y_label="KiB alive")
        st.table(memory_view.held_frame(panel), hide_index=True)
        for note in panel.timeline.notes:
            st.caption(present.md(note))


def module_table(result: Analysis) -> None:
    """Per module: ops, the bytes its saved tensors hold for backward, parameters."""
    if not result.modules:
        return
    st.markdown("**Modules** (ops and activations, the saved tensors beyond parameters, include those of submodules)")
    table = present.module_table(result.modules)
    if len(result.modules) <= STATIC_TABLE_ROWS:
        st.table(table, hide_index=True)
    else:
        st.dataframe(table, hide_index=True)


def graph_pane(result: Analysis) -> None:
    """The interactive viewer: the browser lays the graph out and opens boxes; the page keeps the view for its link.

    The view (open boxes, selection, colouring) starts afresh for a new graph or a new module
    depth or roll; the layout direction and other options keep it.
    """
    s = st.session_state
    shown = (result.source, result.node_count, len(result.graph_json)) if result.source else s.submitted
    scope = (shown, s.opt_depth, s.opt_roll)
    if s.get("view_scope") != scope:
        if s.get("view_scope") is not None:  # not the first graph, which the link's view is for
            s.view, s.expanded = "", ()
        s.view_scope = scope
    digest = hashlib.blake2b(result.viewer.encode(), digest_size=8).hexdigest()
    if s.get("mounted", ("",))[0] != digest:  # what the viewer opens on, fixed while the graph is shown
        s.mounted = (digest, s.view or ("expand=" + ",".join(s.expanded) if s.expanded else ""))
    key = "graph-" + hashlib.blake2b(repr(scope).encode(), digest_size=6).hexdigest()
    try:
        view = graph_viewer(result.viewer, fragment=s.mounted[1], key=key)
    except RenderError as e:
        st.error(present.md(str(e)))
        return
    if view is not None and view != s.view and not result.source:
        s.view, s.expanded = view, ()


def gradient_origin(result: Analysis) -> None:
    """Where NaN/Inf first appears in backward: the op and the program line."""
    if result.gradient_origin:
        st.warning(present.md(result.gradient_origin), icon="⚠️")


def downloads(result: Analysis, options: Options) -> None:
    """SVG, PNG, DOT and JSON downloads (each made when asked for), and a link to this graph."""
    svg, png_col, dot, json_col, link = st.columns([1, 1, 1, 1, 2])
    worker = my_runner(interruptible=False)
    notes = []
    for fmt, column, mime in (("svg", svg, "image/svg+xml"), ("png", png_col, "image/png")):
        failed = results_cache().get(picture_key(fmt, result.graph_json, options.rankdir))
        if isinstance(failed, Failure):  # an earlier click found it cannot be drawn: say why, offer no button
            why = str(failed)
            notes.append(why if why.startswith("No ") else f"No {fmt.upper()} for this graph: {why}")
            continue
        column.download_button(fmt.upper(), partial(picture, fmt, result.graph_json, options.rankdir, worker),
                               f"autograd.{fmt}", mime, on_click="ignore")
    if result.node_count > PICTURE_NODES and not notes:
        notes.append(f"SVG and PNG are laid out by Graphviz when you click them: {result.node_count:,} nodes may "
                     f"take longer than the {runner().time_limit:g} s a job may run, and then the download fails "
                     "(the page then says why). The viewer above shows the whole graph; "
                     "`graphviz-app render autograd.json -o autograd.svg` draws it without the page's limit")
    dot.download_button("DOT", partial(service.dot, result.graph_json, options.rankdir), "autograd.dot",
                        "text/vnd.graphviz", on_click="ignore")
    json_col.download_button("JSON", partial(str, result.graph_json), "autograd.json", "application/json",
                             on_click="ignore")
    if result.source:
        link.caption("A saved graph stays on this page: a link holds the program, not the file.")
    else:
        link.markdown(f"[Link to this graph](?{urlstate.share_query(current_state(options))})")
        notes.append(too_long_for_link() or "")
    for note in notes:
        if note:
            st.caption(present.md(note.rstrip(".") + "."))


def too_long_for_link() -> str | None:
    """Why the link and the address bar leave the program out, or None."""
    chars = len(st.session_state.submitted)
    if chars <= urlstate.MAX_URL_PROGRAM_CHARS:
        return None
    return (f"This program is too long for a link ({chars:,} characters; a link holds at most "
            f"{urlstate.MAX_URL_PROGRAM_CHARS:,}): the link and the address bar keep the options only, "
            "and the program stays on this page. Copy it from the editor to share it")


def values(result: Analysis | Failure | None) -> None:
    """The output's value, and each named leaf's and module parameter's .grad.

    While a saved graph is shown (`result` None), a line says how to get back to the program instead.
    """
    if result is None:
        st.caption("The graph shown is the saved graph you opened; press Run to see this program's graph, "
                   "values and gradients again.")
        return
    if isinstance(result, Failure):
        return
    st.markdown("**Output**")
    st.table(present.values_table(result.outputs), hide_index=True)
    st.markdown("**Gradients** (each named leaf's and module parameter's `.grad` after backward)")
    if not result.grads:
        st.caption("No named leaf tensor or module parameter requires grad: create one with requires_grad=True.")
    elif len(result.grads) <= STATIC_TABLE_ROWS:
        st.table(present.values_table(result.grads), hide_index=True)
    else:
        st.dataframe(present.values_table(result.grads), hide_index=True)


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
        if table is not None and len(table) <= STATIC_TABLE_ROWS:
            st.table(present.highlight_failures(table), hide_index=True)
        elif table is not None:
            st.dataframe(present.highlight_failures(table), hide_index=True)
        grid = present.error_grid(pair, wrt=check.wrt)
        if grid is not None:
            st.markdown("**Error per Jacobian element** (largest difference between the sides; failing ones outlined)")
            st.altair_chart(present.error_heatmap(grid))
    with st.expander("The checker's full report"):
        st.code(check.text, language=None)


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
                     compare=compare_view.second_program())


def sync_url(options: Options) -> None:
    """Keep the address bar a link to what the page shows."""
    query = urlstate.to_query(current_state(options))
    if st.query_params.to_dict() != query:
        st.query_params.from_dict(query)


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
            link=urlstate.share_query(current_state(options)), shown=(problem, problem_b)):
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
