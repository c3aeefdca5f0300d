"""What the page shows of a run: the graph, its caption, downloads, notes, modules, memory and values."""

from __future__ import annotations

import hashlib
from functools import partial

import streamlit as st

from graphviz_app.errors import RenderError
from graphviz_app.web import present, service, urlstate
from graphviz_app.web.failures import show_failure
from graphviz_app.web.links import current_state, too_long_for_link
from graphviz_app.web.page_work import cached, my_runner, picture, picture_key, results_cache, runner
from graphviz_app.web.results import Analysis, Failure
from graphviz_app.web.urlstate import Options
from graphviz_app.web.widgets import graph_viewer

__all__ = ["results", "values"]

# Graphviz lays out about 1,500 nodes in a second here, 5,000 in 5 to 13 s (benchmarks/README.md,
# web view section): above this the page warns that an SVG or PNG download may not finish.
PICTURE_NODES = 3000


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


def gradient_origin(result: Analysis) -> None:
    """Where NaN/Inf first appears in backward: the op and the program line."""
    if result.gradient_origin:
        st.warning(present.md(result.gradient_origin), icon="⚠️")


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


def module_table(result: Analysis) -> None:
    """Per module: ops, the bytes its saved tensors hold for backward, parameters."""
    if not result.modules:
        return
    st.markdown("**Modules** (ops and activations, the saved tensors beyond parameters, include those of submodules)")
    table = present.module_table(result.modules)
    if len(result.modules) <= present.STATIC_TABLE_ROWS:
        st.table(table, hide_index=True)
    else:
        st.dataframe(table, hide_index=True)


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
    elif len(result.grads) <= present.STATIC_TABLE_ROWS:
        st.table(present.values_table(result.grads), hide_index=True)
    else:
        st.dataframe(present.values_table(result.grads), hide_index=True)
