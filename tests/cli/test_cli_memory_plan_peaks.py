"""`graphviz-app memory --checkpoint`: the plan's peak is counted as the table's forecast is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graphviz_app.cli import main

SCRIPT = '''
import torch


class UsedTwice(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(16, 16))

    def forward(self, x):
        return ((x @ self.w) @ self.w).sum()


def build():
    return UsedTwice(), (torch.randn(4, 16),)
'''


@pytest.mark.parametrize("device", ["meta", "cpu"])
def test_the_plan_of_a_weight_used_twice_starts_from_the_tables_peak(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], device: str) -> None:
    script = tmp_path / "twice.py"
    script.write_text(SCRIPT, encoding="utf-8")
    code = main(["memory", f"{script}:build", "--device", device, "--budget", "1KiB", "--checkpoint", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0
    # the loss and its gradient (8 B) and three 16 x 16 gradients of w (3,072 B); before, the plan said 2,312 B on
    # meta (the replay as a plain step sums, beside the table's forecast)
    assert report["predicted_peak_bytes"] == report["checkpoint"]["predicted_peak_before"] == 3_080
