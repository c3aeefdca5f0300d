"""`graphviz-app check SCRIPT.py:FUNC --modules`: the culprit's line first, --json, the drawing, exit codes, errors."""

from __future__ import annotations

import base64
import gzip
import json
import re
from pathlib import Path
from typing import Any

import pytest

from graphviz_app.cli import commands as cli

SCRIPT = '''
import torch
from torch import nn


class Halved(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        return g / 2


class Block(nn.Module):
    def __init__(self, d, wrong=False):
        super().__init__()
        self.fc, self.wrong = nn.Linear(d, d), wrong

    def forward(self, x):
        h = torch.tanh(self.fc(x))
        return x + (Halved.apply(h) if self.wrong else h)


def build():
    torch.manual_seed(0)
    return nn.Sequential(Block(6), Block(6, wrong=True), nn.Linear(6, 2)), torch.randn(4, 6)


def clean():
    torch.manual_seed(0)
    return nn.Sequential(Block(6), nn.Linear(6, 2)), torch.randn(4, 6)


def not_a_model():
    return torch.ones(3)
'''


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "model.py"
    path.write_text(SCRIPT, encoding="utf-8")
    return path


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _backward_line() -> int:
    return next(n for n, line in enumerate(SCRIPT.splitlines(), start=1) if "def backward" in line)


def test_the_first_line_names_the_culprit_and_the_exit_code_is_1(script: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["check", f"{script}:build", "--modules"], capsys)
    assert code == 1
    assert out.splitlines()[0] == (f"1 (Halved.backward, {script}:{_backward_line()}): backward is 0.5 x finite "
                                   "differences for the x input")


def test_a_clean_model_passes_with_exit_code_0(script: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["check", f"{script}:clean", "--modules", "--strategy", "bisect"], capsys)
    assert code == 0 and out.startswith("Sequential: every checked backward agrees with finite differences")


def test_json_and_the_drawing(script: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "check.html"
    code, out, _ = _run(["check", f"{script}:build", "--modules", "--json", "-o", str(path)], capsys)
    data = json.loads(out)
    assert code == 1 and data["passed"] is False
    culprit = next(v for v in data["verdicts"] if v["culprit"])
    assert (culprit["path"], culprit["name"], culprit["kind"]) == ("1", "Halved.backward", "function")
    found = re.search(r'id="gv-payload">([^<]*)<', path.read_text(encoding="utf-8"))
    assert found is not None
    payload: dict[str, Any] = json.loads(gzip.decompress(base64.b64decode(found[1])))
    check = next(o for o in payload["overlays"] if o["key"] == "check")
    graph = payload["graph"]  # the compact form: columns, names as indices into "strings"
    names = {graph["strings"][graph["nodes"]["name"][i]] for i in check["flag"]}
    assert names == {"HalvedBackward"}


def test_the_saved_checked_graph_is_drawn_by_render_color_by_check(script: Path, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    saved, drawn = tmp_path / "check.json", tmp_path / "check.dot"
    code, _, _ = _run(["check", f"{script}:build", "--modules", "-o", str(saved)], capsys)
    assert code == 1
    code, _, err = _run(["render", str(saved), "-o", str(drawn), "--color-by", "check"], capsys)
    assert code == 0, err
    dot = drawn.read_text(encoding="utf-8")
    culprit = next(line for line in dot.splitlines() if "HalvedBackward" in line and "[label=" in line)
    assert "penwidth=3" in culprit and f"Halved.backward, {script}:{_backward_line()}" in culprit
    assert "backward is 0.5 x finite differences" in dot  # the culprit's line titles the picture
    code, _, err = _run(["render", f"{script}:build", "-o", str(tmp_path / "x.dot"), "--color-by", "check"], capsys)
    assert code == 2
    assert "carries none: write one with `graphviz-app check SCRIPT.py:FUNC --modules -o check.json`" in err


def test_include_skip_and_the_budget_reach_the_check(script: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["check", f"{script}:build", "--modules", "--json", "--include", "0*",
                         "--max-evaluations", "5"], capsys)
    data = json.loads(out)
    assert code == 0 and data["budget_spent"] is True
    assert {v["status"] for v in data["verdicts"] if not v["path"].startswith("0")} == {"not checked"}


@pytest.mark.parametrize("argv, message", [
    (["check", "{script}:build"], "names a script: add --modules"),
    (["check", "x.sum()", "--modules"], "--modules checks a model: give SCRIPT.py:FUNC"),
    (["check", "{script}:build", "--modules", "--var", "x=torch.ones(2)"], "--var, --program, --expected"),
    (["check", "{script}:build", "--modules", "-o", "{tmp}/out.png"], "choose a .html"),
    (["check", "{script}:not_a_model", "--modules"], "returned no model with its inputs"),
    (["check", "{script}:build", "--modules", "--probes", "1"], "probes must be an integer of at least 2"),
])
def test_bad_calls_say_what_to_do(argv: list[str], message: str, script: Path, tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run([a.format(script=script, tmp=tmp_path) for a in argv], capsys)
    assert code == 2 and message in err

