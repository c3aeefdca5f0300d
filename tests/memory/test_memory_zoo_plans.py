"""The zoo's checkpoint plans and levers: what is predicted before running is within 10% of what the real step does.

For each zoo model at its largest batch, `advise_checkpoints` for a budget leaving 60% of the measured peak,
verified: the predicted drop of the peak within 10% of the measured drop. Where no module lowers the peak, each
lever `--verify` applies is predicted within 10% of its measured peak.
"""

from __future__ import annotations

from functools import cache

import pytest
import torch
from mem_zoo import ZOO, by_name

from graphviz_app.analysis.memory.levers import LeverKind
from graphviz_app.memory import CheckpointPlan, advise_checkpoints, forecast, measure, total_bytes

pytestmark = pytest.mark.slow


@cache
def _plan(name: str) -> CheckpointPlan:
    model = by_name(name)
    batch = max(model.batches)
    torch.manual_seed(0)
    net = model.spec.prepare(model.spec.build())
    args, kwargs = model.spec.inputs(batch)
    spec = model.spec
    measured = measure(net, *args, loss=spec.loss, autocast=spec.autocast, **kwargs).measured.peak_bytes
    rest = total_bytes(forecast(net, *args, loss=spec.loss, policy="cpu", **kwargs)) - measured
    return advise_checkpoints(net, *args, budget_bytes=rest + int(0.6 * measured), verify=True, loss=spec.loss,
                              **kwargs)


@pytest.mark.parametrize("name", [m.name for m in ZOO])
def test_the_predicted_drop_is_within_10_percent_of_the_measured_drop(name: str) -> None:
    plan = _plan(name)
    if not plan.modules:
        pytest.skip(f"{name}: no module lowers the peak (levers checked below)")
    assert plan.measured_peak_before is not None and plan.measured_peak_after is not None
    predicted = plan.predicted_peak_before - plan.predicted_peak_after
    measured = plan.measured_peak_before - plan.measured_peak_after
    assert abs(predicted - measured) <= 0.10 * abs(measured), (
        f"{name}: predicted drop {predicted} B, measured {measured} B (replay's: {plan.replay_peaks})")


@pytest.mark.parametrize("name", [m.name for m in ZOO])
def test_each_lever_verify_applies_is_within_10_percent_of_its_measured_peak(name: str) -> None:
    plan = _plan(name)
    verified = [lever for lever in plan.levers if lever.measured_peak is not None]
    if plan.reached:
        pytest.skip(f"{name}: the plan reaches its budget, no lever needed")
    assert verified, f"{name}: the plan misses its budget and no lever was verified"
    for lever in verified:
        assert lever.predicted_peak is not None and lever.measured_peak is not None
        assert abs(lever.predicted_peak - lever.measured_peak) <= 0.10 * lever.measured_peak, (
            f"{name}: {lever.what}: predicted {lever.predicted_peak} B, measured {lever.measured_peak} B")


# Language models whose loss is F.cross_entropy over an nn.Linear head's logits (tied or not) and whose plan misses
# the budget: --verify applies the chunked loss to each and measures it (in the 10% test above).
_CHUNKED = ["gpt2", "bert-mlm", "qwen2-tied", "llama", "bart", "roberta-mlm", "gpt2-gc", "llama-bf16", "tiny-gpt-ckpt"]


@pytest.mark.parametrize("name", _CHUNKED)
def test_the_chunked_loss_is_applied_and_measured_on_the_zoos_language_models(name: str) -> None:
    plan = _plan(name)
    lever = next(lv for lv in plan.levers if lv.kind is LeverKind.CHUNKED_LOSS)
    assert lever.head is not None and lever.measured_peak is not None, f"{name}: {lever.manual or lever.reason}"
    assert lever.measured_peak < lever.measured_before, f"{name}: the chunked loss did not lower the measured peak"
