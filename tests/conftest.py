"""Suite-wide fixtures, the skip rules for hardware-bound markers, and browser tests counted as slow."""

from __future__ import annotations

import shutil

import pytest


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    no_cuda = pytest.mark.skip(reason="needs a CUDA GPU: torch.cuda.is_available() is False here")
    no_browser = pytest.mark.skip(reason="needs Debian's chromium at /usr/bin/chromium (apt-get install chromium)")
    has_cuda = _cuda_available()
    has_browser = shutil.which("chromium") is not None
    for item in items:
        if "browser" in item.keywords:  # a real Chromium against a started server: never quick
            item.add_marker(pytest.mark.slow)
        if "cuda" in item.keywords and not has_cuda:
            item.add_marker(no_cuda)
        if "browser" in item.keywords and not has_browser:
            item.add_marker(no_browser)
