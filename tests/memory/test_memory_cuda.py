"""On a GPU: the prediction against `torch.cuda.memory_allocated`, and the meta forecast with CUDA's autocast lists."""

from __future__ import annotations

import pytest
import torch
from mem_models import MODELS

from graphviz_app.analysis.memory import memory_timeline
from graphviz_app.tracing.memory.forecast import predict, step_variant
from graphviz_app.tracing.memory.step import Step, run_step

pytestmark = pytest.mark.cuda

NOT_RNN = sorted(set(MODELS) - {"lstm"})


def _cuda_step(name: str, batch: int) -> Step:
    torch.manual_seed(0)
    make_model, make_inputs = MODELS[name]
    return step_variant(Step(make_model(), make_inputs(batch)), device="cuda")


@pytest.mark.parametrize("name", sorted(MODELS))
def test_predicted_peak_within_10_percent_of_cuda_memory_allocated(name: str) -> None:
    run = run_step(_cuda_step(name, 64))
    assert run.measured is not None and run.measured.method == "cuda"
    predicted = memory_timeline(run.graph, roots=run.roots).peak_bytes
    assert abs(predicted - run.measured.peak_bytes) <= 0.10 * run.measured.peak_bytes


@pytest.mark.parametrize("name", NOT_RNN)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16 autocast"])
def test_meta_forecast_with_cuda_lists_within_10_percent_of_a_cuda_run(name: str, dtype: torch.dtype) -> None:
    step = _cuda_step(name, 64)
    forecast = predict(step_variant(step, device="meta", dtype=dtype, policy="cuda"))
    real = run_step(step_variant(step, dtype=dtype))
    assert real.measured is not None
    assert abs(forecast.timeline.peak_bytes - real.measured.peak_bytes) <= 0.10 * real.measured.peak_bytes
