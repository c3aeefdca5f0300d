"""The built browser bundle (dist/viewer.js and dist/viewer.css), read once per process."""

from __future__ import annotations

from functools import cache
from importlib import resources

from ..errors import RenderError

__all__ = ["bundle_js", "bundle_css"]

_MISSING = (
    "the viewer's browser bundle ({name}) is not built: run `make setup` in the project (it runs "
    "`npm ci && npm run build` in graphviz_app/viewer), or install a built graphviz-app package"
)


@cache
def _read(name: str) -> str:
    path = resources.files("graphviz_app.viewer") / "dist" / name
    try:
        return path.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError) as e:
        raise RenderError(_MISSING.format(name=f"graphviz_app/viewer/dist/{name}")) from e


def bundle_js() -> str:
    """The viewer's script: defines the global `GraphvizAppViewer` with `mount(element, payload, options)`.

    Raises:
        RenderError: the bundle was not built (the message says how to build it).
    """
    text = _read("viewer.js")
    if "</script" in text.lower() or "<!--" in text:  # build.mjs escapes both; a hand-made bundle might not
        raise RenderError("the viewer's bundle holds '</script' or '<!--': rebuild it with `npm run build`")
    return text


def bundle_css() -> str:
    """The viewer's styles."""
    return _read("viewer.css")
