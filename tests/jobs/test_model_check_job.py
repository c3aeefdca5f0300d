"""The worker side of `check --modules`: the script's model checked, the drawing written, the progress bar."""

from __future__ import annotations

from pathlib import Path

import pytest

from graphviz_app.errors import TraceError
from graphviz_app.jobs.model_check import model_check_job

SCRIPT = '''
import torch
from torch import nn


def build():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 2)), torch.randn(3, 4)


def nothing():
    return 42
'''


@pytest.fixture
def script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # the job changes to the folder it is given
    path = tmp_path / "model.py"
    path.write_text(SCRIPT, encoding="utf-8")
    return path


def test_the_job_checks_draws_and_shows_a_bar(script: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "check.dot"
    passed, text, report, written = model_check_job(str(script), "build", f"{script}:build",
                                                    {"progress": True, "output": str(out)}, str(tmp_path))
    err = capsys.readouterr().err
    assert passed and text.startswith("Sequential: every checked backward agrees") and report["passed"]
    assert written == str(out) and out.read_text().startswith("digraph")
    bars = [line.strip("\r") for line in err.splitlines() if "graphviz-app check: [" in line]
    assert bars[-1].startswith("graphviz-app check: [" + "#" * 30 + "] 4/4 (model)")


def test_a_script_that_returns_no_model_says_what_to_return(script: Path, tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="returned no model with its inputs: return"):
        model_check_job(str(script), "nothing", f"{script}:nothing", {}, str(tmp_path))
