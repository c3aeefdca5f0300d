"""The CLI never hangs on a program: it runs in a worker, refused ops stop at once, progress goes to stderr."""

from __future__ import annotations

import io
import re
import sys
import time
from pathlib import Path

import pytest

from graphviz_app.cli import commands as cli
from graphviz_app.cli.progress import Progress
from graphviz_app.expr import Limits

# The ops the red team found running far past 10 s in the CLI (or allocating GBs) before costs.
UNCOSTED = [
    ("torch.zeros(1000000000, 0).count_nonzero(1)", r"would create a tensor of 1,000,000,000 elements"),
    ("torch.prod(torch.zeros(0, 600000000), 0)", r"would create a tensor of 600,000,000 elements"),
    ("F.max_pool1d(torch.randn(1, 1, 4000000), 2000000, stride=1).sum()", r"window of 2,000,000"),
    ("F.avg_pool2d(torch.randn(1, 1, 3000, 3000), 1500, stride=1).sum()", r"window of 1,500x1,500"),
    ("torch.norm(torch.randn(3000, 3000), p='nuc')", r"singular value decomposition"),
    ("m(torch.randn(1000000, 1, 1))[0].sum()", r"1,000,000 time steps"),
    ("torch.cdist(torch.randn(2000, 1000), torch.randn(2000, 1000), p=3).sum()", r"at p=3"),
]


@pytest.fixture(scope="module")
def warm(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The CLI's worker started once, so the timings below are the programs', not a cold start."""
    out = tmp_path_factory.mktemp("warm") / "warm.json"
    assert cli.main(["render", "torch.ones(2, requires_grad=True).sum()", "-o", str(out)]) == 0


@pytest.mark.parametrize(("expression", "message"), UNCOSTED, ids=[f"op{i}" for i in range(len(UNCOSTED))])
def test_each_uncosted_op_is_stopped_within_the_limit(
    warm: None, expression: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    start = time.monotonic()
    code = cli.main(["render", expression, "--var", "m=nn.LSTM(1, 8)", "-o", str(tmp_path / "x.svg")])
    elapsed = time.monotonic() - start
    err = capsys.readouterr().err
    assert code == cli.EXIT_BAD_INPUT, err
    assert re.search(message, err), err
    # Refused from shapes before running: within the program's own limit, with room for a busy machine.
    assert elapsed < Limits().max_seconds + 5
    assert not (tmp_path / "x.svg").exists()


@pytest.mark.slow  # runs into the program's 10 s limit
def test_a_program_running_past_its_limit_between_ops_is_bad_input(
    warm: None, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    program = "a = torch.randn(5000000)\nfor i in range(1000):\n    b = a.median() * a[0]\nb"
    (tmp_path / "loop.txt").write_text(program)
    start = time.monotonic()
    code = cli.main(["render", "--program", str(tmp_path / "loop.txt"), "-o", str(tmp_path / "x.svg")])
    err = capsys.readouterr().err
    assert code == cli.EXIT_BAD_INPUT
    assert re.search(r"ran longer than 10 s \(Limits\.max_seconds\)", err), err
    assert time.monotonic() - start < Limits().max_seconds + 30  # the limit, and a margin for a busy machine


def test_the_whole_command_stops_at_its_timeout(warm: None, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    program = "a = torch.randn(5000000)\nfor i in range(1000):\n    b = a.median() * a[0]\nb"
    code = cli.main(["render", program, "-o", str(tmp_path / "x.svg"), "--timeout", "1"])
    err = capsys.readouterr().err
    assert code == cli.EXIT_BAD_INPUT
    assert re.search(r"time limit of 1 s and was stopped.*the whole command --timeout 1 s", err), err


def test_progress_says_each_slow_step_on_stderr() -> None:
    out = io.StringIO()
    progress = Progress("graphviz-app render", enabled=True, stream=out, after=0.05)
    with progress.step("quick"):
        pass
    with progress.step("laying out 805 nodes with dot (deadline 60 s)"):
        deadline = time.monotonic() + 30
        while "laying out" not in out.getvalue() and time.monotonic() < deadline:
            time.sleep(0.01)  # until the line shows: the step is the slow one
    assert out.getvalue() == "graphviz-app render: laying out 805 nodes with dot (deadline 60 s)...\n"


def test_progress_is_silent_when_stderr_is_not_a_terminal() -> None:
    out = io.StringIO()  # not a terminal
    progress = Progress("graphviz-app render", stream=out, after=0)
    with progress.step("tracing"):
        pass
    assert not progress.enabled and out.getvalue() == ""
    assert Progress("x", stream=sys.stderr).enabled == sys.stderr.isatty()


def test_render_help_states_the_timeout_default(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["render", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--timeout SECONDS" in text and "(default 300)" in text and "--progress" in text


def test_render_with_progress_says_the_slow_layout_and_its_deadline(
    warm: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    slow = tmp_path / "bin" / "dot"  # a layout program that takes 3 s, then fails
    slow.parent.mkdir()
    slow.write_text("#!/bin/sh\nexec /bin/sleep 3\n")
    slow.chmod(0o755)
    monkeypatch.setenv("PATH", str(slow.parent))
    cli.main(["render", "((x+2)**2+3).mean()", "--var", "x=torch.arange(3., requires_grad=True)",
              "-o", str(tmp_path / "x.svg"), "--engine", "dot", "--timeout", "60", "--progress"])
    err = capsys.readouterr().err
    assert re.search(r"^graphviz-app render: drawing 7 nodes \(deadline [\d.]+ s\)\.\.\.$", err, re.M), err
    assert re.search(r"^graphviz-app render: laying out .* with dot", err, re.M), err


RNN_SCRIPT = '''\
import torch
from torch import nn


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(100, 16)
        self.lstm = nn.LSTM(16, 32, num_layers=2)
        self.gru = nn.GRU(32, 32)
        self.out = nn.Linear(32, 5)

    def forward(self, x):
        h, _ = self.lstm(self.emb(x))
        h, _ = self.gru(h)
        return self.out(h).sum()


def rnn():
    torch.manual_seed(0)
    return Tagger(), torch.randint(0, 100, (76, 2))
'''


@pytest.mark.slow
def test_the_lstm_gru_model_is_drawn_within_its_deadline_with_notes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    # The red team's model: `render models.py:rnn --depth 2 --roll` printed nothing for 300 s until killed.
    (tmp_path / "models.py").write_text(RNN_SCRIPT)
    start = time.monotonic()
    code = cli.main(["render", f"{tmp_path / 'models.py'}:rnn", "-o", str(tmp_path / "rnn.svg"), "--depth", "2",
                     "--roll", "--timeout", "60"])
    elapsed = time.monotonic() - start
    err = capsys.readouterr().err
    assert code == 0, err
    assert (tmp_path / "rnn.svg").read_text().lstrip().startswith("<?xml")
    assert re.search(r"note: depth=2 folds nothing: .*depth=0 draws the modules at depth 1 as boxes", err), err
    assert re.search(r"note: folded \d+ module\(s\) into boxes to fit the [\d.]+ s deadline: .*gru \(GRU\)", err), err
    assert elapsed < 60 + 10  # the deadline, and a margin for a busy machine's tracing and start
