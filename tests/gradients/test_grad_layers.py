"""The gradient analyses and drawing are plain-data modules: no torch, and __all__ is honest."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

PURE = ["gradient_report", "gradient_style", "repeats", "renderer"]


@pytest.mark.parametrize("module", [*PURE, "gradflow", "web.gradients"])
def test_every_module_lists_only_names_it_has(module: str) -> None:
    mod = importlib.import_module(f"graphviz_app.{module}")
    assert mod.__all__ and [n for n in mod.__all__ if not hasattr(mod, n)] == []


def test_analyses_and_renderer_import_without_torch() -> None:
    code = (
        "import sys; sys.modules['torch'] = None\n"
        + "".join(f"import graphviz_app.{m}\n" for m in PURE)
        + "from graphviz_app.model import Graph\n"
        "from graphviz_app.repeats import find_repeats\n"
        "print(find_repeats(Graph((), ())))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "None"
