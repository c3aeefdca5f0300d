"""The autocast-bfloat16 lever on LSTM models: predicted on meta with the CPU's fused oneDNN layers in bfloat16 and
their workspaces sized, applied by --verify and measured, against PyTorch's MemTracker on the changed step."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import mem_zoo
import pytest
import torch
from mem_oracle import memtracker_peak
from torch.utils.checkpoint import checkpoint

from graphviz_app.analysis.memory.levers import LeverKind
from graphviz_app.cli import commands as cli
from graphviz_app.tracing.memory.forecast import step_variant
from graphviz_app.tracing.memory.lever_advice import lever_forecasts, verify_levers
from graphviz_app.tracing.memory.rnn import fused_lstm_dtypes
from graphviz_app.tracing.memory.step import Step

pytestmark = pytest.mark.skipif(torch.bfloat16 not in fused_lstm_dtypes(),
                                reason="needs a CPU with oneDNN's bfloat16 kernels (AVX-512 or AVX2-VNNI-2)")


@pytest.mark.parametrize("batch", [1, 8])
def test_the_lever_is_predicted_measured_and_memtrackers_on_the_zoos_lstm(batch: int) -> None:
    spec = mem_zoo.by_name("lstm-lm").spec
    torch.manual_seed(0)
    args, kwargs = spec.inputs(batch)
    step = Step(spec.build(), args, kwargs, loss=spec.loss)
    _, levers = lever_forecasts(step, 1)
    lever = next(lv for lv in verify_levers(step, levers) if lv.kind is LeverKind.AUTOCAST)
    oracle = memtracker_peak(dataclasses.replace(spec, autocast=torch.bfloat16), batch).peak_bytes
    assert (lever.predicted_peak, lever.measured_peak) == (oracle, oracle)
    assert lever.reason is None and lever.applied == "the forward under torch.autocast(torch.bfloat16)"
    assert lever.measured_before == memtracker_peak(spec, batch).peak_bytes != oracle


def test_an_lstm_with_projections_keeps_the_reason() -> None:
    model = torch.nn.LSTM(8, 16, proj_size=4)
    _, levers = lever_forecasts(Step(model, (torch.randn(5, 3, 8),), loss=lambda out: out[0].sum()), 1)
    lever = next(lv for lv in levers if lv.kind is LeverKind.AUTOCAST)
    assert lever.predicted_peak is None
    assert (lever.reason or "").startswith("not predicted for an LSTM with projections (proj_size): oneDNN has no "
                                           "such layer, so under autocast torch runs it step by step")
    assert (lever.reason or "").endswith("measure it with --measure --dtype bfloat16 on the real device")


def test_an_lstm_beside_a_gru_keeps_the_reason() -> None:
    # The LSTM puts the step on meta, where a GRU's cell is not cast as CPU autocast casts it (each step's matmuls).
    model = torch.nn.Sequential(torch.nn.LSTM(8, 16), _First(), torch.nn.GRU(16, 16), _First())
    _, levers = lever_forecasts(Step(model, (torch.randn(5, 3, 8),), loss=lambda out: out.sum()), 1)
    lever = next(lv for lv in levers if lv.kind is LeverKind.AUTOCAST)
    assert lever.predicted_peak is None
    assert (lever.reason or "").startswith("not predicted for a model with an LSTM and a GRU: the LSTM is forecast "
                                           "on meta (oneDNN's layers, their workspaces sized), where the GRU's")


class _First(torch.nn.Module):
    """The output of a recurrent layer, without its states."""

    def forward(self, out: tuple[torch.Tensor, object]) -> torch.Tensor:
        return out[0]


def test_an_lstm_forecast_for_cuda_keeps_the_reason() -> None:
    step = step_variant(Step(torch.nn.LSTM(8, 16), (torch.randn(5, 3, 8),), loss=lambda out: out[0].sum()),
                        device="meta", policy="cuda")
    _, levers = lever_forecasts(step, 1)
    lever = next(lv for lv in levers if lv.kind is LeverKind.AUTOCAST)
    assert lever.predicted_peak is None and "torch runs cuDNN's fused LSTM" in (lever.reason or "")


SCRIPT = '''
import torch
from torch import nn
from torch.nn import functional as F

class LSTMLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(300, 64)
        self.lstm = nn.LSTM(64, 64, num_layers=2, batch_first=True)
        self.out = nn.Linear(64, 300)

    def forward(self, ids):
        return F.cross_entropy(self.out(self.lstm(self.embed(ids))[0]).flatten(0, 1), ids.flatten())

def lm():
    torch.manual_seed(0)
    return LSTMLM(), torch.randint(0, 300, (8, 24), generator=torch.Generator().manual_seed(8))
'''


def test_verify_applies_the_lever_to_an_lstm(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "lstm_lm.py"
    script.write_text(SCRIPT, encoding="utf-8")
    code = cli.main(["memory", f"{script}:lm", "--budget", "1KiB", "--checkpoint", "--verify", "--json"])
    out = capsys.readouterr().out
    assert code == 0
    plan = json.loads(out)["checkpoint"]
    assert plan["levers_on_modules"] == ["lstm"]  # the plan checkpoints the LSTM; the lever is on top of it
    autocast = next(lv for lv in plan["levers"] if lv["lever"] == "autocast_bf16")
    # MemTracker's figure for the zoo's LSTM, checkpointed, at batch 8 (the test above)
    assert autocast["predicted_peak_bytes"] == autocast["measured_peak_bytes"] == 1_650_872
    applied = "non-reentrant checkpointing of lstm; the forward under torch.autocast(torch.bfloat16)"
    assert autocast["applied"] == applied
    code = cli.main(["memory", f"{script}:lm", "--budget", "1KiB", "--checkpoint", "--verify"])
    lines = capsys.readouterr().out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("- autocast bfloat16"))
    assert "predicted peak 2.0 MiB -> 1.6 MiB" in lines[at]
    assert lines[at + 1].strip() == f"applied by --verify: {applied}"
    assert lines[at + 2].strip() == "verified: measured 2.0 MiB -> 1.6 MiB (predicted 1.6 MiB)"


def test_measure_inside_the_callers_autocast_is_the_levers_prediction() -> None:
    # measure() runs the forward on its big-stack thread; the caller's torch.autocast is carried there, so the
    # fused layers run in bfloat16 as the lever predicted them on meta.
    from graphviz_app.memory import measure

    spec = mem_zoo.by_name("lstm-lm").spec
    torch.manual_seed(0)
    args, kwargs = spec.inputs(8)
    model = spec.build()
    _, levers = lever_forecasts(Step(model, args, kwargs, loss=spec.loss), 1)
    lever = next(lv for lv in levers if lv.kind is LeverKind.AUTOCAST)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        measured = measure(model, *args, loss=spec.loss, **kwargs)
    assert measured.measured.peak_bytes == lever.predicted_peak == 2_066_952


def _lstm_checkpointed(model: torch.nn.Module) -> torch.nn.Module:
    """The zoo LSTM with its `lstm` module under torch's non-reentrant checkpointing, written here for MemTracker."""
    forward = model.lstm.forward
    model.lstm.forward = lambda *a, **k: checkpoint(forward, *a, use_reentrant=False, **k)  # type: ignore[method-assign]
    return model


def test_the_levers_are_predicted_on_top_of_a_plan_that_checkpoints_the_lstm() -> None:
    # A checkpointed LSTM recomputes its fused layers in backward: on meta they run fused again, workspaces sized.
    from graphviz_app.memory import advise_checkpoints

    spec = mem_zoo.by_name("lstm-lm").spec
    torch.manual_seed(0)
    args, kwargs = spec.inputs(8)
    plan = advise_checkpoints(spec.build(), *args, loss=spec.loss, budget_bytes=1024, verify=True, **kwargs)
    assert plan.modules == plan.levers_on == ("lstm",)
    ckpt = dataclasses.replace(spec, prepare=_lstm_checkpointed)
    assert plan.predicted_peak_after == plan.measured_peak_after == memtracker_peak(ckpt, 8).peak_bytes == 2_066_616
    levers = {lv.kind: lv for lv in plan.levers}
    assert all(lv.predicted_peak == lv.measured_peak for lv in plan.levers if lv.predicted_peak is not None)
    bf16 = memtracker_peak(dataclasses.replace(ckpt, autocast=torch.bfloat16), 8).peak_bytes
    assert levers[LeverKind.AUTOCAST].predicted_peak == levers[LeverKind.AUTOCAST].measured_peak == bf16 == 1_650_872
