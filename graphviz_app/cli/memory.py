"""`graphviz-app memory SCRIPT.py:FUNC`: the memory of one training step: its peak, what holds it, what fits."""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..analysis.memory.fit import NOT_MODELLED, OPTIMIZERS, parse_bytes
from ..errors import TraceError
from ..model import human_bytes

if TYPE_CHECKING:
    from ..analysis.memory.checkpoint import CheckpointPlan
    from ..tracing.memory.forecast import Prediction
    from ..tracing.memory.step import Step, StepRun

__all__ = ["add_memory_parser", "run_memory", "step_from_result", "parse_budget", "check_device"]

_SCRIPT = re.compile(r"^(?P<path>.+\.py):(?P<func>[A-Za-z_][A-Za-z0-9_]*)$")
_DTYPES = ("float32", "bfloat16", "float16")

DESCRIPTION = (
    "The memory of one training step of a model: forward, then backward from its loss (the output if it is "
    "a scalar, its sum if not, its .loss if it has one). FUNC takes no arguments and returns (model, inputs), "
    "(model, args, kwargs) or {'model': ..., 'args': ..., 'kwargs': ..., 'loss': lambda out: ...}. "
    "The peak counts what the step makes (saved tensors, gradients, .grad); "
    "parameters, buffers, inputs and optimizer state are added to it for the total."
)


def add_memory_parser(sub: Any) -> None:
    """Add the `memory` command to the CLI's subcommands."""
    memory = sub.add_parser("memory", help="predict (and measure) the memory of a training step",
                            description=DESCRIPTION)
    memory.add_argument("target", metavar="SCRIPT.py:FUNC")
    memory.add_argument("--batch", metavar="N[,N...]", help="batch sizes: the first dimension of every tensor "
                        "input (rows repeated or cut), e.g. 1,8,32 (default: the inputs as returned)")
    memory.add_argument("--seq-len", type=int, metavar="N", help="the second dimension of every input of 2+ dims")
    memory.add_argument("--dtype", choices=_DTYPES, default="float32",
                        help="bfloat16/float16: the forward under autocast (or cast, with --cast)")
    memory.add_argument("--cast", action="store_true", help="cast the model and inputs to --dtype (.half()) "
                        "instead of autocast")
    memory.add_argument("--autocast-policy", choices=("cuda", "cpu"), default=None,
                        help="which ops autocast runs in which precision on meta (default cuda; on a real "
                        "device, that device's own)")
    memory.add_argument("--device", metavar="DEVICE", help="meta: forecast without memory; cpu, cuda, cuda:N: "
                        "run there (default: where the model is)")
    memory.add_argument("--budget", metavar="SIZE", help="memory to fit in, e.g. 16GiB: says what fits, the "
                        "largest batch, and the checkpoint plan's target")
    memory.add_argument("--optimizer", choices=tuple(OPTIMIZERS), default="none",
                        help="optimizer state added to the total: sgd (momentum: 1x the parameters), adam (2x)")
    memory.add_argument("--measure", action="store_true", help="also run the step for real and measure it")
    memory.add_argument("--checkpoint", action="store_true", help="advise modules to checkpoint to get under "
                        "--budget (without one: half the peak)")
    memory.add_argument("--verify", action="store_true", help="with --checkpoint: apply the plan, measure, "
                        "print predicted against measured")
    memory.add_argument("--retain-graph", action="store_true", help="backward(retain_graph=True)")
    memory.add_argument("--json", action="store_true", help="print JSON")
    memory.add_argument("-o", "--output", metavar="FILE.html", help="also write the step's graph in the "
                        "interactive viewer, its live bytes charted (with --measure: measured beside predicted; "
                        "with several --batch sizes: the last one's)")


def step_from_result(result: Any, target: str) -> Step:
    """The Step a FUNC's return value describes, in the forms `render` takes: (model, x), (model, (x, y)),
    (model, args, kwargs) or {"model": ..., "args": ..., "kwargs": ..., "loss": lambda out: ...}."""
    from ..tracing.memory.step import Step
    from .script import model_call

    call = model_call(result, target)
    if call is None:
        raise TraceError(f"{target} returned {type(result).__name__}: return the model and its inputs, "
                         "(model, x), (model, (x, y)), (model, args, kwargs) or {'model': model, 'args': (x,), "
                         "'kwargs': {...}, 'loss': lambda out: out.loss}")
    model, args, kwargs, loss = call
    return Step(model, args, kwargs, loss=loss)


def _batches(text: str | None) -> list[int | None]:
    if not text:
        return [None]
    try:
        sizes = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        sizes = []
    if not sizes or any(s < 1 for s in sizes):
        raise TraceError(f"--batch expects positive batch sizes separated by commas, e.g. 1,8,32; found {text!r}")
    return list(sizes)


def run_memory(args: argparse.Namespace, load: Callable[[Path, str, str], Any]) -> int:
    """Run the command: `load(path, func, target)` imports the script and calls FUNC."""
    match = _SCRIPT.match(args.target)
    if match is None:
        raise TraceError(f"memory expects SCRIPT.py:FUNC, found {args.target!r}")
    batches = _batches(args.batch)
    budget = parse_budget(args.budget)
    if args.verify and not args.checkpoint:
        raise TraceError("--verify checks a checkpoint plan: add --checkpoint")
    if (args.measure or args.verify) and args.device == "meta":
        raise TraceError("--measure and --verify run the step for real: use a real --device (cpu, cuda)")
    if args.output and not args.output.lower().endswith(".html"):
        raise TraceError(f"-o writes the interactive viewer: end the name in .html, found {args.output!r}")
    import torch

    from ..tracing.memory.forecast import step_variant

    check_device(args.device)
    step = step_from_result(load(Path(match["path"]), match["func"], args.target), args.target)
    dtype = getattr(torch, args.dtype)
    policy = args.autocast_policy or "cuda"

    def variant(batch: int | None, device: str | None = None) -> Step:
        return step_variant(step, batch=batch, seq_len=args.seq_len, device=device or args.device, dtype=dtype,
                            cast=args.cast, policy=policy)

    rows = [_row(variant(b), b, args, budget) for b in batches]
    report: dict[str, Any] = {
        "target": args.target, "device": _device_text(variant(batches[0])), "dtype": args.dtype,
        "precision": "float32" if args.dtype == "float32" else ("cast" if args.cast else "autocast"),
        "optimizer": args.optimizer, "budget_bytes": budget, "batches": [r["json"] for r in rows],
    }
    # At the top: the last batch size's peaks, the one the peak lines and the plan describe.
    report.update({k: v for k, v in rows[-1]["json"].items() if k.endswith("peak_bytes")})
    if budget is not None:
        report["largest_batch"] = _largest(lambda b: variant(b, "meta"), rows[-1]["prediction"], args, budget)
    plan = _plan(variant(batches[-1]), rows[-1]["prediction"], args, budget) if args.checkpoint else None
    if plan is not None:
        report["checkpoint"] = plan.to_dict()
    report["not_modelled"] = NOT_MODELLED
    print(json.dumps(report, indent=2) if args.json else _text(report, rows, plan))
    if args.output:
        _write_viewer(rows[-1], Path(args.output))
    return 0


def _write_viewer(row: dict[str, Any], path: Path) -> None:
    """The last batch's step in the viewer: the measured step's own graph with its measurement, else the forecast's."""
    from ..drawing.renderer import save

    run = row.get("run")
    if run is not None and run.measured is not None:
        written = save(run.graph, path, measured=run.measured)
    else:
        written = save(row["prediction"].graph, path)
    print(f"wrote {written}", file=sys.stderr)


def parse_budget(text: str | None) -> int | None:
    """--budget as bytes (None without one); a TraceError says what a size looks like."""
    if text is None:
        return None
    try:
        return parse_bytes(text)
    except ValueError as e:
        raise TraceError(f"--budget: {e}") from e


def check_device(text: str | None) -> None:
    """--device names a device torch knows and this machine has; a TraceError says what to use instead."""
    if text is None:
        return
    import torch

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


def _row(step: Step, batch: int | None, args: argparse.Namespace, budget: int | None) -> dict[str, Any]:
    from ..analysis.memory.fit import fit
    from ..tracing.memory.forecast import predict
    from ..tracing.memory.step import run_step

    prediction = predict(step, retain_graph=args.retain_graph)
    timeline = prediction.timeline
    run = run_step(step, retain_graph=args.retain_graph) if args.measure else None
    # The total is of the measured peak when the step was measured, else of the forecast's.
    peak = run.measured.peak_bytes if run is not None and run.measured is not None else prediction.peak_bytes
    total = fit(peak, prediction.static, optimizer=args.optimizer, budget_bytes=budget, batch=batch)
    node = prediction.graph.node(timeline.peak_node) if timeline.peak_node else None
    entry: dict[str, Any] = {
        **total.to_dict(),
        "peak_node": timeline.peak_node, "peak_op": node.name if node else None,
        "peak_module": node.module if node else None, "peak_source": node.source if node else None,
        "peak_step": timeline.peak_step, "steps": len(timeline.steps) - 1,
        "forward_bytes": timeline.forward_bytes,
        "at_peak": [{"module": m.module, "bytes": m.total} for m in timeline.at_peak[:5]],
        "notes": list(timeline.notes), "replay_peak_bytes": timeline.peak_bytes,
        "forecast_peak_bytes": prediction.peak_bytes,
    }
    if run is not None:
        if run.measured is not None:
            entry["measured_peak_bytes"] = run.measured.peak_bytes
            entry["measured_forward_peak_bytes"] = run.measured.forward_peak_bytes
            entry["measured_by"] = run.measured.method
            entry["by_node"] = _by_node(run, args.retain_graph)
        return {"json": entry, "prediction": prediction, "fit": total, "run": run}
    return {"json": entry, "prediction": prediction, "fit": total}


def _by_node(run: StepRun, retain_graph: bool) -> list[dict[str, Any]]:
    """Predicted (from the measured step's own graph, so the ids agree) against measured, per backward node."""
    from ..analysis.memory import memory_timeline, side_by_side

    timeline = memory_timeline(run.graph, roots=run.roots, retain_graph=retain_graph)
    rows = []
    for r in side_by_side(timeline, run.measured) if run.measured is not None else ():
        node = run.graph.node(r.node) if r.node is not None else None
        rows.append({"node": r.node, "name": node.name if node else None, "module": node.module if node else None,
                     "predicted_bytes": r.predicted, "measured_bytes": r.measured})
    return rows


def _largest(meta_step: Callable[[int], Step], prediction: Prediction, args: argparse.Namespace,
             budget: int) -> int:
    from ..analysis.memory.fit import fit, largest_batch
    from ..tracing.memory.forecast import predict

    def total(batch: int) -> int:
        p = predict(meta_step(batch), retain_graph=args.retain_graph)
        return fit(p.peak_bytes, p.static, optimizer=args.optimizer).total_bytes

    return largest_batch(total, budget, limit=1 << 20)


def _plan(step: Step, prediction: Prediction, args: argparse.Namespace, budget: int | None) -> CheckpointPlan:
    from ..analysis.memory.checkpoint import plan_checkpoints
    from ..analysis.memory.fit import fit

    timeline = prediction.timeline
    if budget is None:
        target = timeline.peak_bytes // 2
    else:  # the budget less what exists anyway: the peak's share of it
        fixed = fit(0, prediction.static, optimizer=args.optimizer).total_bytes
        target = max(0, budget - fixed)
    from ..tracing.memory.checkpointing import runnable_modules

    plan = plan_checkpoints(prediction.graph, target, roots=prediction.roots, retain_graph=args.retain_graph,
                            runnable=runnable_modules(step.model))
    if args.verify and plan.modules:
        from ..tracing.memory.checkpointing import verify_plan

        plan = verify_plan(step, plan, retain_graph=args.retain_graph)
    return plan


def _text(report: dict[str, Any], rows: list[dict[str, Any]], plan: CheckpointPlan | None) -> str:
    how = {"float32": "float32", "cast": f"cast to {report['dtype']}", "autocast": f"{report['dtype']} autocast"}
    where = "forecast on meta (nothing allocated)" if report["device"] == "meta" else f"on {report['device']}"
    lines = [f"memory of one step of {report['target']}: {where}, {how[report['precision']]}"]
    budget = report["budget_bytes"]
    header = ["batch", "predicted peak", "measured peak", "+ params/buffers/inputs",
              f"+ optimizer state ({report['optimizer']})", "total"]
    header += [f"fits {human_bytes(budget)}"] if budget else []
    table = [header]
    for row in rows:
        e, f = row["json"], row["fit"]
        table.append([
            "as given" if e["batch"] is None else str(e["batch"]), human_bytes(e["predicted_peak_bytes"]),
            human_bytes(e["measured_peak_bytes"]) if "measured_peak_bytes" in e else "-",
            human_bytes(f.static.params + f.static.buffers + f.static.inputs), human_bytes(f.optimizer_bytes),
            human_bytes(f.total_bytes)] + (["yes" if f.fits else "no"] if budget else []))
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in table]
    lines += _peak_lines(rows[-1]["json"])
    if "largest_batch" in report:
        state = "no optimizer state" if report["optimizer"] == "none" else f"{report['optimizer']} state"
        lines.append(f"largest batch that fits in {human_bytes(budget)} with {state}: {report['largest_batch']}")
    if plan is not None:
        lines.append(str(plan))
    lines.append(f"not modelled: {report['not_modelled']}")
    return "\n".join(lines)


def _peak_lines(entry: dict[str, Any]) -> list[str]:
    batch = "" if entry["batch"] is None else f" at batch {entry['batch']}"
    if entry["peak_node"] is None:
        where = "at the end of the forward"
    else:
        module = entry["peak_module"] if entry["peak_module"] is not None else "no module"
        source = f", {entry['peak_source']}" if entry["peak_source"] else ""
        where = (f"while {entry['peak_op']} ({entry['peak_node']}) runs, in {module or '(root)'}{source}, "
                 f"backward step {entry['peak_step']} of {entry['steps']}")
    held = ", ".join(f"{m['module'] or '(root)' if m['module'] is not None else '(no module)'} "
                     f"{human_bytes(m['bytes'])}" for m in entry["at_peak"])
    lines = [f"peak{batch}: {where}", f"held at the peak: {held}"]
    gaps = [r for r in entry.get("by_node", ()) if r["measured_bytes"] != r["predicted_bytes"]]
    if gaps:
        worst = max(gaps, key=lambda r: abs(r["measured_bytes"] - r["predicted_bytes"]))
        what = "the end of the forward" if worst["node"] is None else (
            f"{worst['name']} ({worst['node']}, in {worst['module'] or '(root)'})")
        lines.append(f"measured against predicted, node by node: {len(gaps)} of {len(entry['by_node'])} steps "
                     f"differ; most at {what}: predicted {human_bytes(worst['predicted_bytes'])}, measured "
                     f"{human_bytes(worst['measured_bytes'])} "
                     f"({worst['measured_bytes'] - worst['predicted_bytes']:+,} B)")
    elif "by_node" in entry:
        lines.append(f"measured against predicted, node by node: all {len(entry['by_node'])} steps agree")
    lines += [f"note: {n}" for n in entry["notes"]]
    return lines
