"""Suite-wide fixtures, the skip rules for hardware-bound markers, and browser tests counted as slow."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# The suite runs with --import-mode=importlib, which puts no test folder on
# sys.path: the shared helpers (corpora, oracles, hand-built graphs, browser
# and server helpers) live in tests/support, one home for every folder. Their
# names carry a prefix (core_, grad_, mem_, mv_, viewer_, web_) so they cannot
# shadow an installed module.
SUPPORT = str(Path(__file__).resolve().parent / "support")
if SUPPORT not in sys.path:
    sys.path.insert(0, SUPPORT)


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    no_cuda = pytest.mark.skip(reason="needs a CUDA GPU: torch.cuda.is_available() is False here")
    no_browser = pytest.mark.skip(reason="needs Debian's chromium at /usr/bin/chromium (apt-get install chromium)")
    no_firefox = pytest.mark.skip(
        reason="needs Debian's firefox-esr at /usr/bin/firefox-esr (apt-get install firefox-esr)")
    has_cuda = _cuda_available()
    has_browser = shutil.which("chromium") is not None
    has_firefox = shutil.which("firefox-esr") is not None
    for item in items:
        if "browser" in item.keywords:  # a real browser (Chromium or Firefox): never quick
            item.add_marker(pytest.mark.slow)
        if "cuda" in item.keywords and not has_cuda:
            item.add_marker(no_cuda)
        if "firefox" in item.keywords:  # Firefox, not Chromium: it needs only firefox-esr
            if not has_firefox:
                item.add_marker(no_firefox)
        elif "browser" in item.keywords and not has_browser:
            item.add_marker(no_browser)


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
