"""Core-suite fixtures: the graph corpus on sys.path, torchviz's recursion room, no `dot`."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# The suite runs with --import-mode=importlib, which puts no test folder on
# sys.path; the shared helpers have core_-prefixed names so they cannot
# shadow another suite's modules.
_HERE = str(Path(__file__).parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)


@pytest.fixture
def deep_recursion() -> Iterator[None]:
    """torchviz recurses once per op: give it room for the corpus' 900-op chain."""
    previous = sys.getrecursionlimit()
    sys.setrecursionlimit(max(previous, 20_000))
    yield
    sys.setrecursionlimit(previous)


@pytest.fixture
def no_dot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No layout program at all: neither `dot` on PATH nor graphviz-pure beside Python."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setattr("graphviz_app.drawing.layout.sysconfig.get_path", lambda name: str(empty))
