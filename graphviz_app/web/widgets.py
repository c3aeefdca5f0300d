"""The page's two custom widgets: a live program editor and a zoomable graph viewer."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import streamlit as st

__all__ = ["EditorEvent", "program_editor", "graph_viewer"]


@dataclass(frozen=True, slots=True)
class EditorEvent:
    """What the editor holds now, and whether Ctrl+Enter asked to run it."""

    text: str
    run: bool


@cache
def _component(name: str) -> Any:  # Streamlit's mount callable has no public type
    files = resources.files("graphviz_app.web") / "static"
    return st.components.v2.component(
        f"graphviz_app.{name}",
        html=(files / f"{name}.html").read_text(encoding="utf-8"),
        css=(files / f"{name}.css").read_text(encoding="utf-8"),
        js=(files / f"{name}.js").read_text(encoding="utf-8"),
    )


def program_editor(initial: str, *, key: str) -> EditorEvent:
    """Show the program editor, filled with `initial` when first drawn.

    The editor keeps what the person types across reruns; to replace its
    text (a gallery example, a link), mount it under a new `key`.
    """
    result = _component("editor")(
        key=key,
        data={"value": initial},
        default={"value": initial},
        on_value_change=lambda: None,
        on_run_change=lambda: None,
    )
    value = getattr(result, "value", None)
    text = value if isinstance(value, str) else initial
    return EditorEvent(text=text, run=bool(getattr(result, "run", False)))


def graph_viewer(svg: str, *, details: str = "{}", key: str = "graph") -> str | None:
    """Show a Graphviz SVG: zoom, pan, an overview, search, and a details panel per node.

    `details` is `graphviz_app.web.worker.details.details_json` of the drawn graph
    (JSON text, parsed in the browser: the server never re-encodes it).
    Returns the module name when a collapsed module box was clicked in this
    run (the page opens it one level), else None.

    The SVG is trusted: Graphviz writes it from the traced model and
    escapes every label; the details are shown as text, never as HTML.
    """
    digest = hashlib.blake2b(svg.encode(), digest_size=8).hexdigest()
    result = _component("viewer")(
        key=key, data={"svg": _strip_prolog(svg), "key": digest, "details": details},
        on_open_change=lambda: None,
    )
    opened = getattr(result, "open", None)
    return opened if isinstance(opened, str) else None


def _strip_prolog(svg: str) -> str:
    """Drop the XML declaration and DOCTYPE that `dot` writes before `<svg`."""
    start = svg.find("<svg")
    return svg[start:] if start >= 0 else svg
