"""Golden-file comparison: fails on any difference; GRAPHVIZ_APP_UPDATE_GOLDEN=1 rewrites."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

__all__ = ["GOLDEN_DIR", "UPDATE_ENV", "assert_golden", "golden_graphs"]

GOLDEN_DIR = Path(__file__).parent / "golden"
UPDATE_ENV = "GRAPHVIZ_APP_UPDATE_GOLDEN"


def assert_golden(name: str, text: str) -> None:
    """Compare `text` with golden/<name>, or rewrite it when GRAPHVIZ_APP_UPDATE_GOLDEN=1.

    A rewrite that changes the file still fails the test, so an update is
    never silent: review `git diff tests/support/golden`, then rerun without it.
    """
    path = GOLDEN_DIR / name
    if os.environ.get(UPDATE_ENV) == "1":
        old = path.read_text(encoding="utf-8") if path.exists() else None
        if old != text:
            path.write_text(text, encoding="utf-8")
            pytest.fail(f"rewrote {path}: review the diff, then rerun without {UPDATE_ENV}=1")
    assert path.exists(), f"no golden file {path}: write it with {UPDATE_ENV}=1"
    assert text == path.read_text(encoding="utf-8"), (
        f"output differs from {path}; if the change is intended, rerun with {UPDATE_ENV}=1"
    )


def seed_example() -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    x = torch.arange(3.0, requires_grad=True)
    return ((x + 2) ** 2 + 3).mean(), {"x": x}


def two_outputs() -> tuple[tuple[torch.Tensor, torch.Tensor], dict[str, torch.Tensor]]:
    """A named and an unnamed leaf, a saved tensor, two outputs sharing w * x."""
    w = torch.tensor([0.5, -1.0], requires_grad=True)
    x = torch.tensor([2.0, 3.0], requires_grad=True)
    z = w * x
    return (z.sum(), (z * z).mean()), {"w": w}  # exact arithmetic: same text on every CPU


def golden_graphs() -> dict[str, object]:
    return {"seed_example": seed_example, "two_outputs": two_outputs}
