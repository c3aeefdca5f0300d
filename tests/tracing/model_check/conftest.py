"""Model-check fixtures: one torch thread on the shared machine (the models live in tests/support/mc_models.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    """Small float64 ops are many times slower when torch's threads fight other processes for 2 cores."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
