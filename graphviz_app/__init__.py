"""Trace, draw and check PyTorch autograd graphs."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from . import _moved
from .analysis import module_summary as _module_summary  # noqa: F401 - provides Graph.module_summary()
from .analysis import summary as _summary  # noqa: F401 - provides Graph.summary()
from .analysis.diff import assert_same_graph, diff
from .analysis.memory import memory_timeline
from .drawing import notebook as _notebook  # noqa: F401 - provides the notebook display
from .drawing.renderer import render, save
from .model import Graph

_moved.install()

__all__ = [
    "trace", "render", "save", "make_dot", "Graph", "record", "trace_model", "record_orders", "diff",
    "assert_same_graph", "memory_timeline",
]

# torch is imported on first use only, so the model, the analyses and the drawing
# work (and are tested) without it. No module or subpackage is named like a
# function exported here (trace, render): importing it would replace that
# function on the package.
_LAZY = {
    "trace": "graphviz_app.tracing.tracer",
    "make_dot": "graphviz_app.compat",
    "record": "graphviz_app.tracing.recorder",
    "trace_model": "graphviz_app.tracing.module_trace",
    "record_orders": "graphviz_app.tracing.orders",
}

if TYPE_CHECKING:
    from .compat import make_dot
    from .tracing.module_trace import trace_model
    from .tracing.orders import record_orders
    from .tracing.recorder import record
    from .tracing.tracer import trace


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'graphviz_app' has no attribute {name!r}")
    value = getattr(import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
