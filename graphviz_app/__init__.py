"""Trace, draw and check PyTorch autograd graphs."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__all__ = ["trace", "render", "save", "make_dot", "Graph"]

# Imported on first use so that `graphviz_app.model` and `graphviz_app.render`
# work without torch installed (the renderer reads only the model).
_LAZY = {
    "trace": "graphviz_app.trace",
    "render": "graphviz_app.render",
    "save": "graphviz_app.render",
    "make_dot": "graphviz_app.compat",
    "Graph": "graphviz_app.model",
}

if TYPE_CHECKING:
    from .compat import make_dot
    from .model import Graph
    from .render import render, save
    from .trace import trace


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'graphviz_app' has no attribute {name!r}")
    value = getattr(import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
