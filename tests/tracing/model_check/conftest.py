"""Model-check fixtures: the planted-bug models on sys.path, one torch thread on the shared machine."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

# --import-mode=importlib puts no test folder on sys.path; the helper's mc_ prefix keeps it from
# shadowing another suite's modules.
_HERE = str(Path(__file__).parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    """Small float64 ops are many times slower when torch's threads fight other processes for 2 cores."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
