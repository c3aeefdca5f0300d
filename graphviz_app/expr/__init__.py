"""A safe expression language for tensor programs, shared by the CLI and the web page.

`validate`, `ExprError` and `Limits` need no torch; the rest loads it on first use.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from .errors import ExprError
from .limits import Limits
from .validator import validate

__all__ = [
    "evaluate",
    "validate",
    "ExprError",
    "Limits",
    "Evaluation",
    "to_function",
    "expected_function",
    "LANGUAGE_HELP",
]

_LAZY = {
    "evaluate": "graphviz_app.expr.api",
    "to_function": "graphviz_app.expr.api",
    "expected_function": "graphviz_app.expr.api",
    "Evaluation": "graphviz_app.expr.evaluator",
    "LANGUAGE_HELP": "graphviz_app.expr.help",
}

if TYPE_CHECKING:
    from .api import evaluate, expected_function, to_function
    from .evaluator import Evaluation
    from .help import LANGUAGE_HELP


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'graphviz_app.expr' has no attribute {name!r}")
    value = getattr(import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
