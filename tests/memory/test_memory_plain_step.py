"""The step as it runs with no dispatch mode on (torch.profiler's memory timeline, torch's own record) against the
figures a person acts on: under a mode (MemTracker, our counter, fake tensors) torch sums a tensor's gradients out
of place, which a plain step does not. Where that moves the peak, the gap is listed here as a strict expected
failure (a fix shows as an unexpected pass), and the forecast's note gives the plain step's peak (its graph replayed
summing in place), checked here against the plain step."""

from __future__ import annotations

import mem_zoo
import pytest
import torch
from mem_oracle import StepSpec
from torch.profiler import ProfilerActivity, profile

from graphviz_app import memory_timeline
from graphviz_app.memory import forecast, measure
from graphviz_app.model import human_bytes

pytestmark = pytest.mark.slow


def _plain_step_peak(spec: StepSpec, batch: int) -> int:
    """The most bytes the step holds beyond what existed before it, from torch.profiler's memory timeline."""
    from torch.profiler._memory_profiler import MemoryProfileTimeline  # torch's own; no public name yet

    torch.manual_seed(0)
    model = spec.prepare(spec.build())
    args, kwargs = spec.inputs(batch)
    for p in model.parameters():
        p.grad = None
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True, with_stack=True) as prof:
        out = model(*args, **kwargs)
        spec.loss(out).backward()
        del out
    _, sizes = MemoryProfileTimeline(prof._memory_profile())._coalesce_timeline(torch.device("cpu"))
    totals = [sum(s) for s in sizes]
    return max(totals) - totals[0]


def _ours(spec: StepSpec, batch: int) -> tuple[int, int, int]:
    """(forecast on fake CPU tensors, measure, the measured graph's replay summing in place as a plain step does)."""
    torch.manual_seed(0)
    model = spec.prepare(spec.build())
    args, kwargs = spec.inputs(batch)
    predicted = forecast(model, *args, loss=spec.loss, policy="cpu", **kwargs).peak_bytes
    m = measure(model, *args, loss=spec.loss, **kwargs)
    return predicted, m.measured.peak_bytes, memory_timeline(m.graph, sums_in_place=True).peak_bytes


@pytest.mark.parametrize("name", ["gpt2", "bert-mlm"])
def test_where_no_sum_moves_the_peak_every_figure_is_the_plain_steps(name: str) -> None:
    spec = mem_zoo.by_name(name).spec
    plain = _plain_step_peak(spec, 2)
    predicted, measured, replay = _ours(spec, 2)
    for label, figure in (("forecast", predicted), ("measure", measured), ("replay", replay)):
        assert abs(figure - plain) <= 0.005 * plain, f"{name}: {label} {figure} B, plain step {plain} B"


@pytest.mark.xfail(strict=True, reason="T5 with gradient_checkpointing_enable() at batch 2: forecast and measure "
                   "1,087,752 B (MemTracker's too), the plain step 967,944 B: +12.4%, the tied `shared` weight's "
                   "gradients summed out of place under a dispatch mode; the replay summing in place: 974,608 B")
def test_t5_with_checkpointing_forecast_is_the_plain_steps() -> None:
    spec = mem_zoo.by_name("t5").spec
    spec = StepSpec(spec.build, spec.inputs, spec.loss, mem_zoo._gc(False))
    plain = _plain_step_peak(spec, 2)
    predicted, measured, replay = _ours(spec, 2)
    assert abs(replay - plain) <= 0.01 * plain  # the replay that sums in place already is
    assert abs(predicted - plain) <= 0.01 * plain, f"forecast {predicted} B, plain step {plain} B"


@pytest.mark.parametrize("batch", [1, 8])
def test_the_forecast_says_what_a_plain_step_peaks_at_where_a_mode_sums_out_of_place(batch: int) -> None:
    x = torch.randn(batch, 16)
    spec = StepSpec(mem_zoo.UsedTwice, lambda b: ((x,), {}), lambda out: out)
    plain = _plain_step_peak(spec, batch)
    prediction = forecast(mem_zoo.UsedTwice(), x)
    assert prediction.peak_bytes == 4 + 4 + 3 * 1_024  # under the mode: the loss, its gradient, three of w's
    replayed = memory_timeline(prediction.graph, roots=prediction.roots, sums_in_place=True).peak_bytes
    assert replayed == plain < prediction.peak_bytes
    note = next(n for n in prediction.notes if "a plain step (no mode on" in n)
    assert f"peaks at {human_bytes(plain)} ({1 - plain / prediction.peak_bytes:.1%} lower)" in note


def test_no_plain_step_note_where_nothing_is_summed() -> None:
    prediction = forecast(torch.nn.Linear(16, 4), torch.randn(8, 16))
    assert not [n for n in prediction.notes if "a plain step (no mode on" in n]


def test_on_t5_with_checkpointing_the_forecast_notes_the_plain_steps_peak() -> None:
    spec = mem_zoo.by_name("t5").spec
    spec = StepSpec(spec.build, spec.inputs, spec.loss, mem_zoo._gc(False))
    plain = _plain_step_peak(spec, 2)
    torch.manual_seed(0)
    model = spec.prepare(spec.build())
    args, kwargs = spec.inputs(2)
    prediction = forecast(model, *args, loss=spec.loss, policy="cpu", **kwargs)
    in_place = memory_timeline(prediction.graph, roots=prediction.roots, sums_in_place=True,
                               forward_peak_bytes=prediction.timeline.forward_peak_bytes).peak_bytes
    note = next(n for n in prediction.notes if "a plain step (no mode on" in n)
    assert f"peaks at {human_bytes(in_place)} " in note
    assert abs(in_place - plain) <= 0.01 * plain, (in_place, plain)  # the forecast itself: +12.4% (above)
