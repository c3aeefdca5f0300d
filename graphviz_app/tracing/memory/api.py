"""What a script calls: measure a step, forecast one on meta, find the largest batch, plan checkpoints."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ...analysis.memory import MeasuredMemory, MemoryTimeline, memory_timeline
from ...analysis.memory.checkpoint import CheckpointPlan, plan_checkpoints
from ...analysis.memory.fit import fit, largest_batch
from ...model import Graph
from .checkpointing import verify_plan
from .forecast import Prediction, predict, step_variant
from .step import Step, run_step

__all__ = ["Measurement", "measure", "forecast", "largest_batch_for", "advise_checkpoints"]


@dataclass(frozen=True)
class Measurement:
    """One real step: its graph, the timeline predicted from it, and what was measured as it ran."""

    graph: Graph
    predicted: MemoryTimeline
    measured: MeasuredMemory


def measure(model: torch.nn.Module, *args: Any, retain_graph: bool = False, **kwargs: Any) -> Measurement:
    """Run `model(*args, **kwargs)` and backward once, measured; with the prediction beside it.

    >>> m = measure(torch.nn.Linear(4, 2), torch.ones(3, 4))
    >>> m.predicted.peak_bytes == m.measured.peak_bytes
    True
    """
    run = run_step(Step(model, args, kwargs), retain_graph=retain_graph)
    assert run.measured is not None  # run_step measures unless told not to
    return Measurement(run.graph, memory_timeline(run.graph, roots=run.roots, retain_graph=retain_graph),
                       run.measured)


def forecast(model: torch.nn.Module, *args: Any, batch: int | None = None, seq_len: int | None = None,
             dtype: torch.dtype | None = None, cast: bool = False, policy: str = "cuda", device: str = "meta",
             retain_graph: bool = False, **kwargs: Any) -> Prediction:
    """The step's predicted memory at another batch size, length or dtype, on `meta` (nothing allocated).

    `dtype` runs the forward under autocast (`policy`: CUDA's or CPU's cast lists), or casts the model
    and inputs with `cast=True` (as `.half()` does). The model passed in is left as it is.

    >>> forecast(torch.nn.Linear(4, 2), torch.ones(3, 4), batch=1000).timeline.peak_bytes > 8000
    True
    """
    step = step_variant(Step(model, args, kwargs), batch=batch, seq_len=seq_len, device=device, dtype=dtype,
                        cast=cast, policy=policy)
    return predict(step, retain_graph=retain_graph)


def largest_batch_for(model: torch.nn.Module, *args: Any, budget_bytes: int, optimizer: str = "none",
                      dtype: torch.dtype | None = None, cast: bool = False, policy: str = "cuda",
                      **kwargs: Any) -> int:
    """The largest batch whose step (peak + parameters, buffers, inputs, optimizer state) fits the budget,
    forecast on meta (0: not even one)."""
    def total(batch: int) -> int:
        p = forecast(model, *args, batch=batch, dtype=dtype, cast=cast, policy=policy, **kwargs)
        return fit(p.timeline.peak_bytes, p.static, optimizer=optimizer).total_bytes

    return largest_batch(total, budget_bytes)


def advise_checkpoints(model: torch.nn.Module, *args: Any, budget_bytes: int, verify: bool = False,
                       **kwargs: Any) -> CheckpointPlan:
    """Modules to checkpoint so the step's predicted peak is at most `budget_bytes`; with `verify`,
    the plan applied and the step measured before and after (on the model's device)."""
    step = Step(model, args, kwargs)
    run = run_step(step, measure=False)
    plan = plan_checkpoints(run.graph, budget_bytes, roots=run.roots)
    return verify_plan(step, plan) if verify and plan.modules else plan
