"""PyTorch's own memory tracker as the reference for a step: MemTracker on the real step, and under FakeTensorMode.

A step here is a factory (so it can be built again inside a fake mode): `build()` makes the
model, `inputs(batch)` the positional and keyword arguments, `loss(output)` the scalar that
backward starts from. The figures are those of `graphviz_app.memory.measure`'s definition:
the most bytes alive during the step, less what existed before it (parameters, buffers, the
step's inputs), each storage once. MemTracker counts parameters, buffers and inputs it is
told about in its total; they are subtracted here, as its snapshot at entry.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch.distributed._tools.mem_tracker import MemTracker
from torch.utils._pytree import tree_leaves

if TYPE_CHECKING:
    from graphviz_app.memory import Measurement

__all__ = ["StepSpec", "OracleRun", "ZooRow", "memtracker_peak", "memtracker_fake_peak", "memtracker_accumulated_peak",
           "frozen_as_buffers", "compare", "measured_as_by_hand"]


@dataclass(frozen=True)
class StepSpec:
    """How to make a step again: the model, its inputs at a batch size, and its loss."""

    build: Callable[[], torch.nn.Module]
    inputs: Callable[[int], tuple[tuple[Any, ...], dict[str, Any]]]
    loss: Callable[[Any], torch.Tensor]
    prepare: Callable[[torch.nn.Module], torch.nn.Module] = lambda m: m  # .half(), checkpointing switched on
    autocast: torch.dtype | None = None


@dataclass(frozen=True)
class OracleRun:
    """MemTracker's peak of one step (bytes, the step's inputs and the model's own tensors left out), and
    the seconds it took."""

    peak_bytes: int
    seconds: float


def _tensors(value: Any) -> list[torch.Tensor]:
    return [t for t in tree_leaves(value) if isinstance(t, torch.Tensor)]


def frozen_as_buffers(model: torch.nn.Module) -> None:
    """Make every frozen parameter (requires_grad False) a buffer holding the same tensor: MemTracker installs a
    gradient hook on every parameter and raises on a frozen one ("cannot register a hook on a tensor that doesn't
    require gradient": Whisper's sinusoidal positions). A frozen parameter gets no gradient, so the step runs the
    same ops on the same storages either way; MemTracker counts it with the model's tensors, left out below."""
    for module in model.modules():
        for name, param in list(module._parameters.items()):
            if param is not None and not param.requires_grad:
                del module._parameters[name]
                module.register_buffer(name, param.data)


def _tracked_step(spec: StepSpec, model: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    frozen_as_buffers(model)
    for p in model.parameters():
        p.grad = None
    tracker = MemTracker()
    tracker.track_external(model, *_tensors((args, kwargs)))  # known before the step: left out below
    device = next(model.parameters()).device
    before = tracker.get_tracker_snapshot("current").get(device, {}).get("Total", 0)
    autocast = (torch.autocast(device.type, dtype=spec.autocast) if spec.autocast is not None
                else torch.autocast(device.type, enabled=False))
    with tracker:
        with autocast:
            out = model(*args, **kwargs)
            loss = spec.loss(out)
        loss.backward()
        del out, loss
    return int(tracker.get_tracker_snapshot("peak")[device]["Total"]) - int(before)


def memtracker_peak(spec: StepSpec, batch: int) -> OracleRun:
    """MemTracker's peak of the real step at `batch` (on CPU)."""
    torch.manual_seed(0)
    model = spec.prepare(spec.build())
    args, kwargs = spec.inputs(batch)
    start = time.process_time()
    peak = _tracked_step(spec, model, args, kwargs)
    return OracleRun(peak, time.process_time() - start)


def memtracker_fake_peak(spec: StepSpec, batch: int) -> OracleRun:
    """MemTracker's peak of the step with the model and inputs built under FakeTensorMode (nothing allocated)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    start = time.process_time()
    with FakeTensorMode():
        torch.manual_seed(0)
        model = spec.prepare(spec.build())
        args, kwargs = spec.inputs(batch)
        peak = _tracked_step(spec, model, args, kwargs)
    return OracleRun(peak, time.process_time() - start)


@dataclass(frozen=True)
class ZooRow:
    """One step's figures side by side (bytes): PyTorch's (`memtracker`, `memtracker_fake`: None where
    MemTracker under FakeTensorMode failed, `fake_error` says how) and ours (`measured`, `replay`,
    `forecast` on meta), with the seconds the two forecasts took."""

    memtracker: int
    memtracker_fake: int | None
    fake_error: str | None
    measured: int
    forward_peak: int
    replay: int
    forecast: int | None
    forecast_error: str | None
    fake_seconds: float
    forecast_seconds: float


def compare(spec: StepSpec, batch: int) -> ZooRow:
    """MemTracker on the real step and under FakeTensorMode, and our measure, replay and meta forecast, at `batch`."""
    from graphviz_app.errors import TraceError
    from graphviz_app.memory import forecast, measure

    real = memtracker_peak(spec, batch)
    try:
        fake: OracleRun | None = memtracker_fake_peak(spec, batch)
        fake_error = None
    except Exception as e:  # noqa: BLE001 - MemTracker+FakeTensorMode fails on some models: recorded, not raised
        fake, fake_error = None, f"{type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}"
    torch.manual_seed(0)
    model = spec.prepare(spec.build())
    args, kwargs = spec.inputs(batch)
    m = measure(model, *args, loss=spec.loss, autocast=spec.autocast, **kwargs)
    start = time.process_time()
    try:
        p = forecast(model, *args, loss=spec.loss, dtype=spec.autocast, policy="cpu", **kwargs)
        predicted, forecast_error = p.peak_bytes, None
    except TraceError as e:
        predicted, forecast_error = None, str(e)
    return ZooRow(real.peak_bytes, fake.peak_bytes if fake else None, fake_error, m.measured.peak_bytes,
                  m.measured.forward_peak_bytes, m.predicted.peak_bytes, predicted, forecast_error,
                  fake.seconds if fake else 0.0, time.process_time() - start)


def measured_as_by_hand(build: Callable[[], torch.nn.Module], x: torch.Tensor, batch: int, hand: int,
                        loss: Callable[[Any], torch.Tensor] = lambda out: out) -> Measurement:
    """`measure` of one step of `build()` on `x`; asserts that MemTracker on the real step, the measurement and the
    replay of its graph each hold `hand` bytes at the peak, and returns the Measurement for further checks."""
    from graphviz_app.memory import measure

    m = measure(build(), x, loss=loss)
    assert memtracker_peak(StepSpec(build, lambda b: ((x,), {}), loss), batch).peak_bytes == hand
    assert m.measured.peak_bytes == hand
    assert m.predicted.peak_bytes == hand
    return m


def memtracker_accumulated_peak(spec: StepSpec, batch: int, micro_steps: int) -> int:
    """MemTracker's peak of `micro_steps` forward and backward passes at `batch`, `.grad` accumulated between them
    (none at the start), the model's tensors and the inputs left out."""
    torch.manual_seed(0)
    model = spec.prepare(spec.build())
    args, kwargs = spec.inputs(batch)
    for p in model.parameters():
        p.grad = None
    tracker = MemTracker()
    tracker.track_external(model, *_tensors((args, kwargs)))
    device = next(model.parameters()).device
    before = tracker.get_tracker_snapshot("current").get(device, {}).get("Total", 0)
    with tracker:
        for _ in range(micro_steps):
            out = model(*args, **kwargs)
            loss = spec.loss(out)
            loss.backward()
            del out, loss
            tracker.reset_mod_stats()  # MemTracker refuses a module run twice otherwise; the global peak stays
    return int(tracker.get_tracker_snapshot("peak")[device]["Total"]) - int(before)
