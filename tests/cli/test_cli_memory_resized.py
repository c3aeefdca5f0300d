"""`graphviz-app memory` where --batch or --seq-len make inputs the model refuses: an error naming the size asked
and the inputs changed, not "unexpected ValueError"."""

from __future__ import annotations

from pathlib import Path

import pytest

from graphviz_app.cli import commands as cli

SCRIPT = '''
import torch
from torch import nn

class Patches(nn.Module):
    """Checks its channels as transformers' vision models do (ViT, ViT-MAE: a ValueError)."""
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 4, stride=4)

    def forward(self, pixel_values):
        if pixel_values.shape[1] != 3:
            raise ValueError(f"Expected 3 channels but got {pixel_values.shape[1]}.")
        return self.conv(pixel_values).square().mean()

def image():
    return Patches(), (), {"pixel_values": torch.randn(2, 3, 16, 16)}

class Broken(nn.Linear):
    def forward(self, x):
        raise KeyError("no such layer")

def broken():
    return Broken(4, 4), torch.randn(2, 4)
'''


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "vision.py"
    path.write_text(SCRIPT, encoding="utf-8")
    return path


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = cli.main(argv)
    return code, capsys.readouterr().err


@pytest.mark.parametrize("device", ["meta", "cpu"])
def test_a_seq_len_the_model_refuses_names_the_inputs_it_changed(script: Path, device: str,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    # before: "unexpected ValueError: Expected 3 channels but got 8. (run with --traceback for details)"
    code, err = _run(["memory", f"{script}:image", "--seq-len", "8", "--device", device], capsys)
    assert code != 0
    assert "unexpected" not in err
    assert "the step failed at --seq-len 8: ValueError: Expected 3 channels but got 8." in err
    assert "pixel_values (2, 3, 16, 16) -> (2, 8, 16, 16)" in err
    assert "return inputs of the sizes you want from FUNC" in err


def test_the_same_step_at_its_own_sizes_and_another_batch_runs(script: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["memory", f"{script}:image", "--batch", "1,4", "--device", "meta"])
    out = capsys.readouterr().out
    assert code == 0
    assert [line.split()[0] for line in out.splitlines()[2:4]] == ["1", "4"]


def test_a_forward_that_raises_at_its_own_size_says_the_forward_raised(script: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _run(["memory", f"{script}:broken", "--device", "meta"], capsys)
    assert code != 0
    assert "the step failed: KeyError: 'no such layer'; the model's forward raised it" in err
