"""`render` says when the graph holds several forward passes (a loss accumulated over steps), as the page does."""

from __future__ import annotations

from pathlib import Path

import pytest

from graphviz_app.cli import commands as cli

ACCUMULATED = (
    "w = torch.randn(4, 3, requires_grad=True)\nb = torch.randn(3, requires_grad=True)\nx = torch.randn(5, 4)\n"
    "total = 0\nfor step in range(4):\n    total = total + ((x @ w + b).tanh() ** 2).mean()\ntotal"
)
ONE_PASS = "w = torch.randn(4, 3, requires_grad=True)\nx = torch.randn(5, 4)\n((x @ w).tanh() ** 2).mean()"


def test_a_loss_accumulated_over_steps_is_named_in_the_wrote_line_and_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    program = tmp_path / "steps.txt"
    program.write_text(ACCUMULATED)
    assert cli.main(["render", "--program", str(program), "-o", str(tmp_path / "g.dot")]) == cli.EXIT_OK
    out, err = capsys.readouterr()
    assert "holds 4 forward passes: a 5-op block repeated 4 times, see the note" in out
    assert "note: this graph repeats the same 5-op block 4 times over the same parameters (b, w)" in err
    assert "accumulate `loss.item()` (a number) instead of `loss`" in err


def test_one_forward_pass_gets_no_such_note(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    program = tmp_path / "one.txt"
    program.write_text(ONE_PASS)
    assert cli.main(["render", "--program", str(program), "-o", str(tmp_path / "g.dot")]) == cli.EXIT_OK
    out, err = capsys.readouterr()
    assert out.startswith("wrote ") and "forward passes" not in out + err
