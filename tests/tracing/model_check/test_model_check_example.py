"""The gallery example finds its planted wrong Function, names its line and draws it red."""

from __future__ import annotations

import re
import runpy
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "model_check_transformer.py"


@pytest.mark.slow
def test_the_example_names_the_planted_function_and_colours_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "argv", [str(EXAMPLE), "--out", str(tmp_path)])
    runpy.run_path(str(EXAMPLE), run_name="__main__")
    out = capsys.readouterr().out
    line = next(n for n, text in enumerate(EXAMPLE.read_text().splitlines(), start=1)
                if "def backward(ctx, g)" in text)
    first = out.splitlines()[0]
    assert first.startswith("blocks.1.attn (ScaledSoftmax.backward, ")
    assert first.endswith(f"model_check_transformer.py:{line}): backward is 4 x finite differences for the x input")
    dot = (tmp_path / "model_check_transformer.dot").read_text()
    red = [m.group(1) for m in re.finditer(r'label="(\w+)[^"]*"[^\]]*fillcolor="#ffc9c9"', dot)]
    assert red == ["ScaledSoftmaxBackward"]
    assert (tmp_path / "model_check_transformer.html").read_text().startswith("<!DOCTYPE html>")
