"""The examples of the compiled, higher-order and diff features run as scripts and show what they promise."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # each runs a fresh Python that imports torch

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _run(name: str, out: Path) -> str:
    done = subprocess.run([sys.executable, str(EXAMPLES / name), "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_gradient_penalty_is_drawn_with_both_orders(tmp_path: Path) -> None:
    out = _run("gradient_penalty.py", tmp_path)
    assert "penalty graph : ops per order {0: 12, 1: 5}" in out
    assert "its gradient  : ops per order {0: 7, 1: 5, 2: 19}" in out
    svg = (tmp_path / "gradient_penalty_grad.svg").read_text()
    assert "order 1: made by the forward&#39;s backward" in svg and "order 2: made by the backward of order 1" in svg
