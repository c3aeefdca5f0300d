"""Module paths of earlier versions, kept importable: `graphviz_app.renderer` is `graphviz_app.drawing.renderer`.

The package was split into layers (tracing, model, analysis, drawing, web, cli). Code written
against the flat layout keeps working: importing an old path gives the module at its new path
(the same module object, so `graphviz_app.renderer.export is graphviz_app.drawing.renderer.export`).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from collections.abc import Sequence
from types import ModuleType

__all__ = ["MOVED", "install"]

MOVED = {
    "graphviz_app.tracer": "graphviz_app.tracing.tracer",
    "graphviz_app.recorder": "graphviz_app.tracing.recorder",
    "graphviz_app.model_trace": "graphviz_app.tracing.module_trace",
    "graphviz_app.tensor_info": "graphviz_app.tracing.tensor_info",
    "graphviz_app.param_owners": "graphviz_app.tracing.param_owners",
    "graphviz_app.gradflow": "graphviz_app.tracing.replay",
    "graphviz_app.deep": "graphviz_app.tracing.big_stack",
    "graphviz_app.summary": "graphviz_app.analysis.summary",
    "graphviz_app.module_summary": "graphviz_app.analysis.module_summary",
    "graphviz_app.collapse": "graphviz_app.analysis.collapse",
    "graphviz_app.gradient_report": "graphviz_app.analysis.gradient_report",
    "graphviz_app.repeats": "graphviz_app.analysis.repeats",
    "graphviz_app.nearest": "graphviz_app.analysis.nearest",
    "graphviz_app.renderer": "graphviz_app.drawing.renderer",
    "graphviz_app.style": "graphviz_app.drawing.style",
    "graphviz_app.gradient_style": "graphviz_app.drawing.gradient_style",
    "graphviz_app.layout": "graphviz_app.drawing.layout",
    "graphviz_app.cluster": "graphviz_app.drawing.clusters",
}


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old path and hands back the module imported from its new one."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def __init__(self) -> None:
        self._real_specs: dict[str, importlib.machinery.ModuleSpec | None] = {}

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(MOVED[spec.name])
        self._real_specs[module.__name__] = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module was executed under its new name.

        The import system has just set the module's `__spec__` to the old path's; put back
        its own, so pickling, `importlib.reload` and `find_spec` still see its real name.
        """
        module.__spec__ = self._real_specs[module.__name__]


def install() -> None:
    """Make the old paths importable (once; `import graphviz_app` calls it)."""
    if not any(isinstance(finder, _Alias) for finder in sys.meta_path):
        sys.meta_path.append(_Alias())
