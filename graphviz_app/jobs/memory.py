"""The memory of one training step, as the CLI reports it: forecast per batch size, measured, what fits, a plan.

Runs inside a worker process (`graphviz-app memory` names `cli.memory_job` by
reference): the person's script is imported and called there, so a function
that hangs stops at the command's --timeout. A **budget** is the whole step's
memory on the device, as `graphviz_app.analysis.memory.fit.Fit.total_bytes`
counts it: the peak + parameters + buffers + inputs + the optimizer's state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..analysis.memory import memory_timeline, side_by_side
from ..analysis.memory.checkpoint import CheckpointPlan, plan_checkpoints
from ..analysis.memory.fit import NOT_MODELLED, Fit, fit, largest_batch
from ..analysis.memory.plan import with_forward_peak
from ..drawing.renderer import save
from ..errors import TraceError
from ..tracing.memory.checkpointing import forecast_plan, runnable_modules, verify_plan
from ..tracing.memory.forecast import Prediction, changed_inputs, predict, step_variant
from ..tracing.memory.lever_advice import with_levers
from ..tracing.memory.step import Step, StepRun, run_step
from ..tracing.module_trace import given_tensors
from .script_forms import model_call

__all__ = ["MemoryRequest", "MemoryRow", "MemoryReport", "memory_report", "write_viewer", "step_from_result",
           "check_device"]


@dataclass(frozen=True, slots=True)
class MemoryRequest:
    """What to report (the `memory` command's options).

    Attributes:
        batches: batch sizes (None: the inputs as returned).
        budget_bytes: the whole step's memory to fit in (see the module docstring), or None.
        output: also write the last batch's step into the interactive viewer at this path.
    """

    target: str
    batches: tuple[int | None, ...] = (None,)
    seq_len: int | None = None
    device: str | None = None
    dtype: str = "float32"
    cast: bool = False
    policy: str = "cuda"
    optimizer: str = "none"
    budget_bytes: int | None = None
    measure: bool = False
    checkpoint: bool = False
    verify: bool = False
    retain_graph: bool = False
    output: str | None = None


@dataclass(frozen=True)
class MemoryRow:
    """One batch size: the report's JSON entry, the forecast, the whole step's total, the measured run, and the
    step it was forecast with (on fake CPU tensors where meta with CUDA's policy could not run it)."""

    json: dict[str, Any]
    prediction: Prediction
    fit: Fit
    run: StepRun | None = None
    step: Step | None = None


@dataclass(frozen=True)
class MemoryReport:
    """The report (`json`, what `--json` prints), its rows, and the checkpoint plan when asked for."""

    json: dict[str, Any]
    rows: tuple[MemoryRow, ...]
    plan: CheckpointPlan | None = None


def memory_report(step: Step, request: MemoryRequest) -> MemoryReport:
    """The memory of `step` at each batch size; with a budget, the largest batch that fits; the plan if asked.

    Raises:
        TraceError: a device this machine lacks.
    """
    check_device(request.device)
    dtype = getattr(torch, request.dtype)

    def variant(batch: int | None, device: str | None = None, policy: str | None = None) -> Step:
        return step_variant(step, batch=batch, seq_len=request.seq_len, device=device or request.device,
                            dtype=dtype, cast=request.cast, policy=policy or request.policy)

    rows = [_row_here_or_on_cpu(step, variant, b, request) for b in request.batches]
    budget = request.budget_bytes
    report: dict[str, Any] = {
        "target": request.target, "device": _device_text(variant(request.batches[0])), "dtype": request.dtype,
        "precision": "float32" if request.dtype == "float32" else ("cast" if request.cast else "autocast"),
        "optimizer": request.optimizer, "budget_bytes": budget, "batches": [r.json for r in rows],
    }
    # At the top: the last batch size's peaks, the one the peak lines and the plan describe.
    report.update({k: v for k, v in rows[-1].json.items() if k.endswith("peak_bytes")})
    if budget is not None:
        report.update(_largest_entry(variant, request, budget))
    last = rows[-1].step or variant(request.batches[-1])
    plan = _plan(last, rows[-1].prediction, request) if request.checkpoint else None
    if plan is not None:
        report["checkpoint"] = plan.to_dict()
    report["not_modelled"] = NOT_MODELLED
    return MemoryReport(report, tuple(rows), plan)


def write_viewer(row: MemoryRow, path: Path) -> Path:
    """The row's step in the viewer: the measured step's own graph with its measurement, else the forecast's."""
    run = row.run
    if run is not None and run.measured is not None:
        graph = with_forward_peak(run.graph, run.roots, run.measured.forward_peak_bytes)
        return save(graph, path, measured=run.measured)
    return save(row.prediction.graph, path)


def step_from_result(result: Any, target: str) -> Step:
    """The Step a FUNC's return value describes, in the forms `render` takes: (model, x), (model, (x, y)),
    (model, args, kwargs) or {"model": ..., "args": ..., "kwargs": ..., "loss": lambda out: ...}."""
    call = model_call(result, target)
    if call is None:
        raise TraceError(f"{target} returned {type(result).__name__}: return the model and its inputs, "
                         "(model, x), (model, (x, y)), (model, args, kwargs) or {'model': model, 'args': (x,), "
                         "'kwargs': {...}, 'loss': lambda out: out.loss}")
    model, args, kwargs, loss = call
    return Step(model, args, kwargs, loss=loss)


def check_device(text: str | None) -> None:
    """--device names a device torch knows and this machine has; a TraceError says what to use instead."""
    if text is None:
        return
    try:
        device = torch.device(text)
    except RuntimeError as e:
        raise TraceError(f"--device: expected meta, cpu, cuda or cuda:N, found {text!r}") from e
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise TraceError(f"--device {text}: this machine has no CUDA GPU (torch.cuda.is_available() is False); "
                             "forecast the step without one: --device meta (CUDA's autocast lists by default)")
        if device.index is not None and device.index >= count:
            raise TraceError(f"--device {text}: this machine has {count} CUDA GPU(s), cuda:0 to cuda:{count - 1}")
    elif device.type not in ("cpu", "meta"):
        raise TraceError(f"--device: expected meta, cpu, cuda or cuda:N, found {text!r}")


def _device_text(step: Step) -> str:
    return next((str(p.device) for p in step.model.parameters()), "cpu")


def _row_here_or_on_cpu(given: Step, variant: Callable[..., Step], batch: int | None,
                        request: MemoryRequest) -> MemoryRow:
    """The row at `batch`; where the step cannot run on meta with CUDA's policy (transformers reads position_ids'
    values unless the tensors are fake: any model with gradient_checkpointing_enable() and no attention_mask), on
    fake CPU tensors with a note saying so, as the largest batch is searched; the first error if that fails too."""
    resized = variant(batch)
    try:
        return _row_said(given, resized, batch, request)
    except TraceError as e:
        on_meta = {t.device.type for t in given_tensors(resized.model, resized.args, resized.kwargs)} == {"meta"}
        if request.policy == "cpu" or not on_meta:
            raise
        failed = e
    try:
        row = _row_said(given, variant(batch, "meta", "cpu"), batch, request)
    except TraceError:
        raise failed from None
    row.json["notes"].append(f"forecast on fake CPU tensors (CPU's attention kernels and autocast lists, which may "
                             f"save other tensors than CUDA's), as {str(failed).split('; ')[0]} with CUDA's policy")
    return row


def _row_said(given: Step, resized: Step, batch: int | None, request: MemoryRequest) -> MemoryRow:
    """`_row(resized, ...)`, where the model's own code raising (a shape check, a ValueError of the library) becomes a
    TraceError saying at which size, and which inputs --batch and --seq-len changed: the step as FUNC returned it
    may run while a resized one does not (an image's channels taken for a sequence length)."""
    try:
        return _row(resized, batch, request)
    except (TraceError, MemoryError):
        raise
    except Exception as e:  # noqa: BLE001 - the model's or library's own error, worded with what was asked
        first = str(e).splitlines()[0] if str(e) else ""
        asked = [f"batch {batch}"] if batch is not None else []
        asked += [f"--seq-len {request.seq_len}"] if request.seq_len is not None else []
        at = f" at {', '.join(asked)}" if asked else ""
        changed = changed_inputs(given, resized)
        hint = ("; the inputs resized: " + ", ".join(changed) + " (--batch sets the first dimension of every "
                "tensor input, --seq-len the second of every input of 2+ dims): return inputs of the sizes you "
                "want from FUNC and leave these out" if changed else
                "; the model's forward raised it (run with --traceback for where)")
        raise TraceError(f"the step failed{at}: {type(e).__name__}: {first}{hint}") from e


def _row(step: Step, batch: int | None, request: MemoryRequest) -> MemoryRow:
    prediction = predict(step, retain_graph=request.retain_graph)
    timeline = prediction.timeline
    run = run_step(step, retain_graph=request.retain_graph) if request.measure else None
    # The total is of the measured peak when the step was measured, else of the forecast's.
    peak = run.measured.peak_bytes if run is not None and run.measured is not None else prediction.peak_bytes
    total = fit(peak, prediction.static, optimizer=request.optimizer, budget_bytes=request.budget_bytes, batch=batch)
    node = prediction.graph.node(timeline.peak_node) if timeline.peak_node else None
    entry: dict[str, Any] = {
        **total.to_dict(),
        "peak_node": timeline.peak_node, "peak_op": node.name if node else None,
        "peak_module": node.module if node else None, "peak_source": node.source if node else None,
        "peak_step": timeline.peak_step, "steps": len(timeline.steps) - 1,
        "forward_bytes": timeline.forward_bytes,
        "at_peak": [{"module": m.module, "bytes": m.total} for m in timeline.at_peak[:5]],
        "notes": list(timeline.notes), "replay_peak_bytes": timeline.peak_bytes,
        "forecast_peak_bytes": prediction.peak_bytes, "peak_in_forward": timeline.peak_in_forward,
        "replay_backward_peak_bytes": max((s.peak for s in timeline.steps), default=0),  # what at_peak is of
    }
    entry["predicted_peak_bytes"] = prediction.peak_bytes  # the total above is of the measured peak, if measured
    if run is None:
        return MemoryRow(entry, prediction, total, step=step)
    if run.measured is not None:
        entry["measured_peak_bytes"] = run.measured.peak_bytes
        entry["measured_forward_peak_bytes"] = run.measured.forward_peak_bytes
        entry["measured_by"] = run.measured.method
        entry["by_node"] = _by_node(run, request.retain_graph)
    return MemoryRow(entry, prediction, total, run, step)


def _by_node(run: StepRun, retain_graph: bool) -> list[dict[str, Any]]:
    """Predicted (from the measured step's own graph, so the ids agree) against measured, per backward node."""
    timeline = memory_timeline(run.graph, roots=run.roots, retain_graph=retain_graph, sums_in_place=run.sums_in_place)
    rows = []
    for r in side_by_side(timeline, run.measured) if run.measured is not None else ():
        node = run.graph.node(r.node) if r.node is not None else None
        rows.append({"node": r.node, "name": node.name if node else None, "module": node.module if node else None,
                     "predicted_bytes": r.predicted, "measured_bytes": r.measured})
    return rows


def _largest_entry(variant: Callable[..., Step], request: MemoryRequest, budget: int) -> dict[str, Any]:
    """`largest_batch`, searched on meta; where the step cannot run there (a value read: transformers' check of
    position_ids), on fake CPU tensors with a note; else None with the reason, the rows above still printed."""
    try:
        return {"largest_batch": _largest(lambda b: variant(b, "meta"), request, budget)}
    except TraceError as e:
        failed = str(e)
    if request.policy != "cpu":
        try:
            found = _largest(lambda b: variant(b, "meta", "cpu"), request, budget)
        except TraceError:
            pass
        else:
            return {"largest_batch": found, "largest_batch_note": "searched on fake CPU tensors (CPU's kernels), "
                                                                  f"as {failed.split('; ')[0]}"}
    return {"largest_batch": None, "largest_batch_note": f"not found: {failed}"}


def _largest(meta_step: Callable[[int], Step], request: MemoryRequest, budget: int) -> int:
    """The largest batch whose whole step fits `budget`, forecast on meta."""
    def total(batch: int) -> int:
        p = predict(meta_step(batch), retain_graph=request.retain_graph)
        return fit(p.peak_bytes, p.static, optimizer=request.optimizer).total_bytes

    return largest_batch(total, budget, limit=1 << 20)


def _plan(step: Step, prediction: Prediction, request: MemoryRequest) -> CheckpointPlan:
    """Modules to checkpoint: for the peak's share of the budget (the budget less what exists anyway), or half
    the peak without one."""
    timeline = prediction.timeline
    if request.budget_bytes is None:
        target = timeline.peak_bytes // 2
    else:
        fixed = fit(0, prediction.static, optimizer=request.optimizer).total_bytes
        target = max(0, request.budget_bytes - fixed)
    plan = plan_checkpoints(prediction.graph, target, roots=prediction.roots, retain_graph=request.retain_graph,
                            runnable=runnable_modules(step.model), sums_in_place=prediction.sums_in_place)
    plan = forecast_plan(step, plan)
    if request.verify and plan.modules:
        plan = verify_plan(step, plan, retain_graph=request.retain_graph)
    return with_levers(step, plan, verify=request.verify)
