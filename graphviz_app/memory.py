"""The memory of a training step, in one place: measure it, forecast it on `meta`, find the largest batch, advise.

What counts: a step's **peak** is the most bytes alive at any moment of the step
(forward and backward: saved tensors, gradients being made, the `.grad` made in the
step, the outputs the user holds), each storage once, less what existed before the
step: the parameters, buffers and the step's input tensors. That is PyTorch's
`MemTracker` figure on the same step less those tensors; `torch.cuda.max_memory_allocated`
differs by them too (and by the allocator's rounding).

A **budget** means one thing everywhere (library and CLI): the whole step's memory on the
device, `Fit.total_bytes`: the peak + parameters + buffers + the step's inputs + the
optimizer's state. `largest_batch_for(budget_bytes=...)` and `advise_checkpoints(budget_bytes=...)`
both take it so.

>>> m = measure(torch.nn.Linear(4, 2), torch.ones(3, 4))
>>> m.measured.peak_bytes == m.predicted.peak_bytes
True
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from .analysis.memory import HolderKind, MeasuredMemory, MemoryTimeline, memory_timeline
from .analysis.memory.checkpoint import CheckpointPlan, plan_checkpoints
from .analysis.memory.fit import fit, largest_batch
from .analysis.memory.plan import with_forward_peak
from .errors import TraceError
from .model import Graph, human_bytes
from .tracing.memory.checkpointing import checkpoint_modules, forecast_plan, runnable_modules, verify_plan
from .tracing.memory.chunked_loss import chunked_cross_entropy
from .tracing.memory.forecast import Prediction, changed_inputs, predict, static_bytes, step_variant
from .tracing.memory.lever_advice import with_levers
from .tracing.memory.step import Step, run_step

__all__ = ["Measurement", "Prediction", "CheckpointPlan", "HolderKind", "measure", "forecast", "total_bytes",
           "largest_batch_for", "advise_checkpoints", "checkpoint_modules", "chunked_cross_entropy"]


@dataclass(frozen=True)
class Measurement:
    """One real step: its graph, the timeline predicted from it, and what was measured as it ran."""

    graph: Graph
    predicted: MemoryTimeline
    measured: MeasuredMemory

    def __repr__(self) -> str:
        """One line of figures (the dataclass repr, every step of both timelines, is 20,000+ characters on GPT-2).

        >>> measure(torch.nn.Linear(4, 2), torch.ones(3, 4))  # doctest: +NORMALIZE_WHITESPACE
        <Measurement: peak 68 B measured on cpu (the forward's own 24 B), the replay of its graph 68 B;
        print(m.predicted) for who holds it, m.measured.steps per backward node, m.graph to draw it>
        """
        return (f"<Measurement: peak {human_bytes(self.measured.peak_bytes)} measured on {self.measured.device} "
                f"(the forward's own {human_bytes(self.measured.forward_peak_bytes)}), the replay of its graph "
                f"{human_bytes(self.predicted.peak_bytes)}; print(m.predicted) for who holds it, m.measured.steps "
                "per backward node, m.graph to draw it>")


def measure(model: torch.nn.Module, *args: Any, loss: Callable[[Any], Any] | None = None,
            autocast: torch.dtype | None = None, retain_graph: bool = False, **kwargs: Any) -> Measurement:
    """Run `model(*args, **kwargs)` and backward once, measured; with the replay of its graph beside it.

    Args:
        model: the module; its `.grad` are put back as they were afterwards.
        *args: positional inputs; **kwargs: keyword inputs of the model.
        loss: a function of the output giving what backward starts from (default: the
            output's `loss`, or the sum of its tensors); the output stays held by the user
            during backward, as in `out = model(x); loss(out).backward()`.
        autocast: run the forward under `torch.autocast` with this dtype.
        retain_graph: backward keeps the saved tensors.

    Returns:
        A Measurement: the graph, the replayed timeline, and the measured memory (the peak as the
        module docstring defines it; `measured.forward_peak_bytes` the forward's own).

    For a model spread over ranks (DDP, FSDP2, DTensor parameters) inside a process group (a rank of
    a torchrun job, or a fake cluster), the rank's step is counted as the rank holds it: DTensors by
    their local shards, FSDP2's all-gathered parameters, gradients and collective buffers included,
    and replayed with its FSDP units (`graphviz_app.distributed`).
    """
    from .tracing.distributed.rank_measure import measure_in_rank
    from .tracing.distributed.spread import spread_over_ranks

    _check_model(model)
    if spread_over_ranks(model):
        return Measurement(*measure_in_rank(model, args, kwargs, loss=loss, autocast=autocast,
                                            retain_graph=retain_graph))
    step = Step(model, args, kwargs, autocast=autocast, loss=loss)
    run = run_step(step, retain_graph=retain_graph)
    if run.measured is None:  # run_step measures unless told not to
        raise RuntimeError("run_step returned no measurement")
    graph = with_forward_peak(run.graph, run.roots, run.measured.forward_peak_bytes)  # kept by save and load
    timeline = memory_timeline(graph, roots=run.roots, retain_graph=retain_graph,
                               sums_in_place=run.sums_in_place)
    return Measurement(graph, timeline, run.measured)


def forecast(model: torch.nn.Module, *args: Any, batch: int | None = None, seq_len: int | None = None,
             dtype: torch.dtype | None = None, cast: bool = False, policy: str = "cuda", device: str = "meta",
             loss: Callable[[Any], Any] | None = None, retain_graph: bool = False, **kwargs: Any) -> Prediction:
    """The step's memory at another batch size, length or dtype, forecast by running it on `meta` (nothing
    allocated): forward and backward counted as `measure` counts (`.peak_bytes`), the replay beside it.

    `dtype` runs the forward under autocast (`policy`: CUDA's or CPU's cast lists), or casts the model
    and inputs with `cast=True` (as `.half()` does). `loss` as in `measure`; tensors it captures (a
    target, in its closure or a global it names) are moved and resized as the inputs are.
    The model passed in is left as it is.

    Raises:
        TraceError: an argument of the wrong kind or out of range (said which, and what to pass), or a step that
            cannot run there (the op without a meta kernel named; a forward reading a tensor's value).

    >>> forecast(torch.nn.Linear(4, 2), torch.ones(3, 4), batch=1000).peak_bytes > 8000
    True
    """
    _check_forecast(model, batch=batch, seq_len=seq_len, dtype=dtype, policy=policy, device=device)
    given = Step(model, args, kwargs, loss=loss)
    step = step_variant(given, batch=batch, seq_len=seq_len, device=device, dtype=dtype, cast=cast, policy=policy)
    try:
        return predict(step, retain_graph=retain_graph)
    except TraceError as e:
        changed = changed_inputs(given, step)
        if not changed:
            raise
        raise TraceError(f"{e}; the inputs resized: {', '.join(changed)} (batch sets the first dimension of every "
                         "tensor input, seq_len the second of every input of 2+ dims)") from e


def _check_model(model: Any) -> None:  # noqa: ANN401 - checked here
    if not isinstance(model, torch.nn.Module):
        raise TraceError(f"model: expected a torch.nn.Module, got {type(model).__name__}; wrap a function in a module "
                         "whose forward calls it")


def _check_forecast(model: Any, *, batch: Any, seq_len: Any, dtype: Any, policy: Any,  # noqa: ANN401
                    device: Any) -> None:  # noqa: ANN401 - the arguments as given, checked here
    """The forecast's arguments, each of its kind and in range; a TraceError says which and what to pass."""
    _check_model(model)
    for name, value in (("batch", batch), ("seq_len", seq_len)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise TraceError(f"{name}: expected a whole number from 1 up (or None: the inputs as given), got {value!r}")
    if dtype is not None and not isinstance(dtype, torch.dtype):
        named = isinstance(dtype, str) and isinstance(getattr(torch, dtype, None), torch.dtype)
        raise TraceError(f"dtype: expected a torch.dtype, got {dtype!r}: pass "
                         f"{f'torch.{dtype}' if named else 'torch.bfloat16, torch.float16 or None'}")
    if policy not in ("cuda", "cpu"):
        raise TraceError(f"policy: expected 'cuda' or 'cpu' (whose autocast lists and kernels), got {policy!r}")
    try:
        torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise TraceError(f"device: expected 'meta' (nothing allocated), 'cpu', 'cuda' or 'cuda:N', got {device!r}") \
            from e


def _check_budget(budget_bytes: Any) -> None:  # noqa: ANN401 - checked here
    if isinstance(budget_bytes, bool) or not isinstance(budget_bytes, int) or budget_bytes < 1:
        hint = (": a size in bytes, e.g. 16 * 2**30 for 16 GiB (graphviz_app.analysis.memory.fit.parse_bytes reads "
                "'16GiB')" if isinstance(budget_bytes, str) else "")
        raise TraceError(f"budget_bytes: expected a whole number of bytes from 1 up, got {budget_bytes!r}{hint}")


def total_bytes(prediction: Prediction, *, optimizer: str = "none") -> int:
    """The step's whole memory on the device, what a budget is compared with: the forecast peak + parameters +
    buffers + inputs + `optimizer`'s state ("none", "sgd", "adam")."""
    return fit(prediction.peak_bytes, prediction.static, optimizer=optimizer).total_bytes


def largest_batch_for(model: torch.nn.Module, *args: Any, budget_bytes: int, optimizer: str = "none",
                      dtype: torch.dtype | None = None, cast: bool = False, policy: str = "cuda",
                      loss: Callable[[Any], Any] | None = None, **kwargs: Any) -> int:
    """The largest batch whose step fits `budget_bytes` (the whole step: peak + parameters, buffers, inputs,
    optimizer state), forecast on meta (0: not even one)."""
    _check_budget(budget_bytes)
    _check_forecast(model, batch=None, seq_len=None, dtype=dtype, policy=policy, device="meta")

    def total(batch: int) -> int:
        p = forecast(model, *args, batch=batch, dtype=dtype, cast=cast, policy=policy, loss=loss, **kwargs)
        return total_bytes(p, optimizer=optimizer)

    return largest_batch(total, budget_bytes)


def advise_checkpoints(model: torch.nn.Module, *args: Any, budget_bytes: int, optimizer: str = "none",
                       verify: bool = False, loss: Callable[[Any], Any] | None = None,
                       **kwargs: Any) -> CheckpointPlan:
    """Modules to checkpoint so the step fits `budget_bytes` (the whole step, as in `largest_batch_for`: the
    plan's own `budget_bytes` is what that leaves for the peak); with `verify`, the plan applied and the step
    measured before and after (on the model's device). The graph's replay chooses the modules; the peaks
    predicted before and after are forecast by running the step on fake tensors without and with them
    checkpointed (`replay_peaks` keeps the replay's).

    When the plan does not reach the budget (what holds the peak is not saved tensors: `.grad`, logits), its
    `levers` predict the peak with each lever that lowers it otherwise, on top of the plan's modules, forecast on
    fake tensors: each `.grad` freed once accumulated, autocast bfloat16, micro-batches with gradient
    accumulation, the loss computed in chunks over the tokens (`chunked_cross_entropy`, where the loss is
    `F.cross_entropy` over an `nn.Linear` head's logits; else the replay's what-if, a lower bound), and the best
    combination of them; with `verify`, each predicted one is applied to the real step and measured.
    `checkpoint_modules(model, plan.modules)` applies the plan to the model for training."""
    _check_budget(budget_bytes)
    _check_model(model)
    step = Step(model, args, kwargs, loss=loss)
    run = run_step(step, measure=False)
    rest = fit(0, static_bytes(step), optimizer=optimizer).total_bytes
    # counted as `forecast` counts (a dispatch mode, under which torch sums gradients into new tensors): the plan's
    # peaks and the forecast's agree
    plan = plan_checkpoints(run.graph, max(0, budget_bytes - rest), roots=run.roots, runnable=runnable_modules(model),
                            sums_in_place=False)
    plan = forecast_plan(step, plan)
    plan = verify_plan(step, plan) if verify and plan.modules else plan
    return with_levers(step, plan, verify=verify)
