"""`graphviz-app memory` as a new user meets it: --batch or --seq-len making inputs the model refuses (an error
naming the size asked and the inputs changed, not "unexpected ValueError"), and --device meta on a model that
reads a value unless its tensors are fake (the rows forecast on fake CPU tensors, with a note)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from mem_oracle import StepSpec, memtracker_peak

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

class ChecksValues(nn.Linear):
    # transformers reads position_ids' values unless the tensors are fake (its packed-sequence check), as any
    # model after gradient_checkpointing_enable() without an attention_mask does
    def forward(self, x):
        from torch._subclasses.fake_tensor import FakeTensor
        if not isinstance(x, FakeTensor) and bool((x[:, -1] == 12345).all()):
            return super().forward(x).sum()
        return super().forward(x).square().sum()

def checks_values():
    return ChecksValues(8, 8), torch.randn(4, 8)

class ReadsValues(nn.Linear):
    def forward(self, x):
        return super().forward(x).sum() if x.sum().item() > 1e9 else super().forward(x).square().sum()

def reads_values():
    return ReadsValues(8, 8), torch.randn(4, 8)
'''


class Squared(torch.nn.Linear):
    """ChecksValues as it runs on fake tensors (its value check skipped): the step the forecast counts."""

    def __init__(self) -> None:
        super().__init__(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x).square().sum()


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


def test_meta_rows_of_a_step_that_reads_values_on_meta_are_forecast_on_fake_cpu_tensors(
        script: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # before: the whole command stopped with "the step failed on meta: ... Tensor.item()", although the largest
    # batch it went on to search was found on fake CPU tensors
    code = cli.main(["memory", f"{script}:checks_values", "--device", "meta", "--batch", "4,64", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0
    for entry in report["batches"]:
        b = entry["batch"]
        real = memtracker_peak(StepSpec(Squared, lambda rows: ((torch.randn(rows, 8),), {}), lambda out: out),
                               b).peak_bytes
        assert entry["predicted_peak_bytes"] == real, b
        note = entry["notes"][-1]
        assert note.startswith("forecast on fake CPU tensors (CPU's attention kernels and autocast lists")
        assert note.endswith("Tensor.item() cannot be called on meta tensors with CUDA's policy")


def test_a_step_that_reads_values_on_fake_tensors_too_still_says_so(script: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _run(["memory", f"{script}:reads_values", "--device", "meta"], capsys)
    assert code != 0
    assert "the step failed on meta" in err and "reads a tensor's value" in err


def test_the_checkpoint_plan_of_such_a_step_is_made_on_the_same_fake_cpu_tensors(
        script: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # before: the rows printed, then the plan ran the step on meta with CUDA's policy again and stopped there
    code = cli.main(["memory", f"{script}:checks_values", "--device", "meta", "--checkpoint", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0
    plan = report["checkpoint"]
    assert plan["predicted_peak_before"] == report["batches"][0]["predicted_peak_bytes"]


def test_a_budget_not_even_batch_1_fits_says_so_in_words(script: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # before: "largest batch that fits in 256 B with no optimizer state: 0", which reads as a batch size (the
    # parameters alone are 288 B)
    code = cli.main(["memory", f"{script}:checks_values", "--budget", "256B"])
    out = capsys.readouterr().out
    assert code == 0
    assert "largest batch that fits in 256 B with no optimizer state: none, not even batch 1" in out


def test_not_modelled_does_not_say_a_measured_steps_replay_misses_op_temporaries(
        script: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """measure and forecast record each op's temporaries and the recompute: the line says the replay misses them
    only in a graph that does not record them (before: "in the replay only ...: temporaries inside one backward
    op", printed under every measured table)."""
    code = cli.main(["memory", f"{script}:image", "--measure"])
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("not modelled: "))
    assert code == 0
    assert "in the replay only" not in line
    assert "in the replay of a graph that does not record them" in line
