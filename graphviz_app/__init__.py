"""Trace, draw and check PyTorch autograd graphs."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from .model import Graph
from .renderer import render, save

__all__ = ["trace", "render", "save", "make_dot", "Graph", "record", "trace_model"]

# torch is imported on first use only, so the model and the renderer work (and
# are tested) without it. The modules are named tracer/renderer, not
# trace/render: a submodule named like the function it exports would replace
# that function on the package as soon as anyone imported the submodule.
_LAZY = {
    "trace": "graphviz_app.tracer",
    "make_dot": "graphviz_app.compat",
    "record": "graphviz_app.recorder",
    "trace_model": "graphviz_app.model_trace",
}

if TYPE_CHECKING:
    from .compat import make_dot
    from .model_trace import trace_model
    from .recorder import record
    from .tracer import trace


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'graphviz_app' has no attribute {name!r}")
    value = getattr(import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
