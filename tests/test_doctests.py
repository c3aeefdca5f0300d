"""The examples in the core modules' docstrings are true."""

from __future__ import annotations

import doctest
import importlib

import pytest


@pytest.mark.parametrize(
    "module",
    ["graphviz_app.model", "graphviz_app.summary", "graphviz_app.style", "graphviz_app.tracer", "graphviz_app.deep",
     "graphviz_app.recorder", "graphviz_app.model_trace", "graphviz_app.param_owners"],
)
def test_docstring_examples_hold(module: str) -> None:
    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted > 0, f"{module} has no docstring example"
    assert result.failed == 0
