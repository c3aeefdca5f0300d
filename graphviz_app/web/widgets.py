"""The page's custom widgets: a live program editor, the interactive graph viewer and two graphs in synced panes."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import streamlit as st

from ..viewer.bundle import bundle_css, bundle_js

__all__ = ["EditorEvent", "program_editor", "graph_viewer", "compare_viewer"]


@dataclass(frozen=True, slots=True)
class EditorEvent:
    """What the editor holds now, and whether Ctrl+Enter asked to run it."""

    text: str
    run: bool


def _static(name: str) -> str:
    return (resources.files("graphviz_app.web") / "static" / name).read_text(encoding="utf-8")


@cache
def _component(name: str) -> Any:  # Streamlit's mount callable has no public type
    return st.components.v2.component(
        f"graphviz_app.{name}", html=_static(f"{name}.html"), css=_static(f"{name}.css"), js=_static(f"{name}.js"),
    )


@cache
def _viewer_library() -> Any:
    """The viewer's bundle (`graphviz_app.viewer`), made the page's `GraphvizAppViewer`.

    An element of its own that never changes: Streamlit sends an unchanged element once, so the
    1.5 MB bundle reaches the browser once per visit, and each graph only its own data.
    """
    return st.components.v2.component(
        "graphviz_app.viewer_library", html="<div hidden></div>", js=bundle_js() + "\n" + _static("viewer_library.js"),
    )


@cache
def _viewer() -> Any:
    """The viewer's component: the page's glue (`static/viewer.js`) and the viewer's styles; the graph as data."""
    return st.components.v2.component(
        "graphviz_app.viewer",
        html=_static("viewer.html"),
        css=bundle_css() + "\n" + _static("viewer.css"),
        js=_static("viewer.js"),
    )


def program_editor(initial: str, *, key: str, label: str | None = None, testid: str | None = None) -> EditorEvent:
    """Show the program editor, filled with `initial` when first drawn.

    The editor keeps what the person types across reruns; to replace its
    text (a gallery example, a link), mount it under a new `key`. `label` and
    `testid` (its `data-testid`) tell a second editor from the first.
    """
    named = {k: v for k, v in (("label", label), ("testid", testid)) if v is not None}
    result = _component("editor")(
        key=key,
        data={"value": initial, **named},
        default={"value": initial},
        on_value_change=lambda: None,
        on_run_change=lambda: None,
    )
    value = getattr(result, "value", None)
    text = value if isinstance(value, str) else initial
    return EditorEvent(text=text, run=bool(getattr(result, "run", False)))


def graph_viewer(payload: str, *, fragment: str = "", key: str = "graph") -> str | None:
    """Show the interactive viewer (`graphviz_app.viewer`) on the viewer's data `payload`.

    The browser lays the graph out, opens and closes boxes, searches and shows details:
    the page sends `payload` once per graph (an unchanged element is not sent again on a
    rerun). `fragment` is the view to open on (the viewer's URL fragment, e.g.
    `open=0.3&sel=n4`, or `expand=layers.0`), read when the graph is first shown.

    Returns the view the person has made (as a fragment) once they change it, else None.

    Raises:
        RenderError: the viewer's bundle is not built (the message says how to build it).
    """
    digest = hashlib.blake2b(payload.encode(), digest_size=8).hexdigest()
    _viewer_library()(key="viewer-library")
    result = _viewer()(key=key, data={"payload": payload, "key": digest, "fragment": fragment},
                       on_view_change=lambda: None)
    view = getattr(result, "view", None)
    return view if isinstance(view, str) else None


def compare_viewer(payload: str, *, fragment: str = "", key: str = "compare") -> str | None:
    """Show two graphs side by side in synced panes (`GraphvizAppViewer.mountCompare`) on the compare data `payload`
    (`graphviz_app.viewer.compare.compare_payload`, encoded), sent once per pair as `graph_viewer` sends a graph.

    `fragment` is the view the first pane opens on (the second follows it: its boxes open, its
    selection's counterpart selected). Returns the panes' view (the first pane's fragment) once the
    person changes it, else None.

    Raises:
        RenderError: the viewer's bundle is not built (the message says how to build it).
    """
    digest = hashlib.blake2b(payload.encode(), digest_size=8).hexdigest()
    _viewer_library()(key="viewer-library")
    result = _viewer()(key=key, data={"payload": payload, "key": digest, "fragment": fragment, "mount": "mountCompare"},
                       on_view_change=lambda: None)
    view = getattr(result, "view", None)
    return view if isinstance(view, str) else None
