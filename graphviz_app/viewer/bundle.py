"""The built browser bundle (dist/viewer.js and dist/viewer.css), read once per process."""

from __future__ import annotations

import base64
import gzip
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from ..errors import RenderError

__all__ = ["DIST", "bundle_js", "bundle_css", "bundle_gzip"]

# Where the bundle is read from: dist/ beside this module, package data in a built wheel.
DIST: Traversable | Path = resources.files("graphviz_app.viewer") / "dist"

_MISSING = (
    "the interactive viewer's browser bundle ({name}) is missing from {folder}: this copy of graphviz-app was "
    "installed without it. To get it: reinstall graphviz-app from a wheel, or from a source checkout with "
    "`pip install .` (building the wheel runs npm: Node.js 18 or later and npm on PATH); for an editable install "
    "(`pip install -e .`) run `npm ci && npm run build` in graphviz_app/viewer (`make setup` does both). "
    "The static formats (.svg, .png, .pdf, .dot, .json) need no bundle"
)


_READ: dict[tuple[str, str], str] = {}  # (folder, name) -> text: each file is read once per process


def _read(folder: Traversable | Path, name: str) -> str:
    key = (str(folder), name)
    if key not in _READ:
        try:
            _READ[key] = (folder / name).read_text(encoding="utf-8")
        except (FileNotFoundError, NotADirectoryError) as e:
            raise RenderError(_MISSING.format(name=name, folder=folder)) from e
    return _READ[key]


def bundle_js() -> str:
    """The viewer's script: defines the global `GraphvizAppViewer` with `mount(element, payload, options)`.

    Raises:
        RenderError: the bundle is missing (the message says how to get it).
    """
    text = _read(DIST, "viewer.js")
    if "</script" in text.lower() or "<!--" in text:  # build.mjs escapes both; a hand-made bundle might not
        raise RenderError("the viewer's bundle holds '</script' or '<!--': rebuild it with `npm run build`")
    return text


def bundle_css() -> str:
    """The viewer's styles.

    Raises:
        RenderError: the bundle is missing (the message says how to get it).
    """
    return _read(DIST, "viewer.css")


_GZIPPED: dict[str, str] = {}  # the script's text -> its gzip in base64, made once per process


def bundle_gzip() -> str:
    """The viewer's script gzipped (level 9, no time stamp) in base64: what a notebook carries once per page.

    Raises:
        RenderError: the bundle is missing (the message says how to get it).
    """
    text = bundle_js()
    if text not in _GZIPPED:
        packed = gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0)
        _GZIPPED[text] = base64.b64encode(packed).decode("ascii")
    return _GZIPPED[text]
