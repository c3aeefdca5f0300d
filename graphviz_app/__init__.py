"""Trace, draw and check PyTorch autograd graphs.

The package's names load on first use (PEP 562 `__getattr__`): `import graphviz_app` loads no
layer, `import graphviz_app.model` loads the model alone, and torch, graphviz or the analyses load
when a name that needs them is first read.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__all__ = [
    "trace", "render", "save", "make_dot", "Graph", "record", "trace_model", "record_orders", "diff",
    "assert_same_graph", "memory_timeline", "check_model", "compare",
]

# Where each name lives; the imports under TYPE_CHECKING below are the same arrows, written
# as imports for type checkers and the architecture tests. No module or subpackage is named
# like a function exported here (trace, render): importing it would replace that function on the package.
_HOMES = {
    "trace": "graphviz_app.tracing.tracer",
    "render": "graphviz_app.drawing.renderer",
    "save": "graphviz_app.drawing.renderer",
    "make_dot": "graphviz_app.compat",
    "Graph": "graphviz_app.model",
    "record": "graphviz_app.tracing.recorder",
    "trace_model": "graphviz_app.tracing.module_trace",
    "record_orders": "graphviz_app.tracing.orders",
    "diff": "graphviz_app.analysis.diff",
    "assert_same_graph": "graphviz_app.analysis.diff",
    "memory_timeline": "graphviz_app.analysis.memory",
    "check_model": "graphviz_app.tracing.model_check",
    "compare": "graphviz_app.drawing.comparison",
}

if TYPE_CHECKING:
    from .analysis.diff import assert_same_graph, diff
    from .analysis.memory import memory_timeline
    from .compat import make_dot
    from .drawing.comparison import compare
    from .drawing.renderer import render, save
    from .model import Graph
    from .tracing.model_check import check_model
    from .tracing.module_trace import trace_model
    from .tracing.orders import record_orders
    from .tracing.recorder import record
    from .tracing.tracer import trace


def __getattr__(name: str) -> Any:
    """Load a public name from its module on first use, and keep it on the package."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'graphviz_app' has no attribute {name!r}")
    value = getattr(import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
