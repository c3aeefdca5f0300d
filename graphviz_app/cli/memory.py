"""`graphviz-app memory SCRIPT.py:FUNC`: the memory of one training step: its peak, what holds it, what fits.

This side parses and prints; the step is loaded, forecast and measured in a worker
process (`graphviz_app.jobs.memory`), which the command's --timeout stops.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from ..analysis.memory.fit import OPTIMIZERS, parse_bytes
from ..errors import TraceError
from ..model import human_bytes
from ..model.numbers import LARGEST_SIZE
from ..runner import RunnerError
from .files import SCRIPT_TARGET, FileProblem, check_output, check_script
from .numbers import LONGEST_TIMEOUT_S, device, real, sizes, whole
from .worker import MEMORY_JOB, run_script_job, script_stopped

__all__ = ["add_memory_parser", "run_memory", "parse_budget", "MEMORY_SECONDS"]

# The default --timeout: a real model forecast at several batch sizes, measured and verified, takes minutes.
MEMORY_SECONDS = 1800.0


_DTYPES = ("float32", "bfloat16", "float16")
_SEQ_HINT = ": the length of the sequences the model reads, e.g. --seq-len 512"

DESCRIPTION = (
    "The memory of one training step of a model: forward, then backward from its loss (the output if it is "
    "a scalar, its sum if not, its .loss if it has one). FUNC takes no arguments and returns (model, inputs), "
    "(model, args, kwargs) or {'model': ..., 'args': ..., 'kwargs': ..., 'loss': lambda out: ...}. "
    "The peak counts what the step makes (saved tensors, gradients, .grad); "
    "parameters, buffers, inputs and optimizer state are added to it for the total, the step's whole memory "
    "on the device, which --budget is compared with."
)


def add_memory_parser(sub: Any) -> None:
    """Add the `memory` command to the CLI's subcommands."""
    memory = sub.add_parser("memory", help="predict (and measure) the memory of a training step",
                            description=DESCRIPTION)
    memory.add_argument("target", metavar="SCRIPT.py:FUNC")
    memory.add_argument("--batch", metavar="N[,N...]", type=sizes,
                        help="batch sizes: the first dimension of every tensor input (rows repeated or cut), "
                        f"e.g. 1,8,32, each from 1 to {LARGEST_SIZE:,} (default: the inputs as returned)")
    memory.add_argument("--seq-len", type=whole(1, hint=_SEQ_HINT), metavar="N",
                        help=f"the second dimension of every input of 2+ dims, from 1 to {LARGEST_SIZE:,}")
    memory.add_argument("--dtype", choices=_DTYPES, default="float32",
                        help="bfloat16/float16: the forward under autocast (or cast, with --cast)")
    memory.add_argument("--cast", action="store_true", help="cast the model and inputs to --dtype (.half()) "
                        "instead of autocast")
    memory.add_argument("--autocast-policy", choices=("cuda", "cpu"), default=None,
                        help="which ops autocast runs in which precision on meta (default cuda; on a real "
                        "device, that device's own)")
    memory.add_argument("--device", metavar="DEVICE", type=device("meta", "cpu", "cuda"),
                        help="meta: forecast without memory; cpu, cuda, cuda:N: run there (default: where the "
                        "model is)")
    memory.add_argument("--budget", metavar="SIZE", help="the device's memory to fit in, e.g. 16GiB, for the "
                        "whole step: peak + parameters + buffers + inputs + optimizer state (\"will it fit on my "
                        "card\"); says what fits, the largest batch, and the checkpoint plan's target (the budget "
                        "less what exists anyway)")
    memory.add_argument("--optimizer", choices=tuple(OPTIMIZERS), default="none",
                        help="optimizer state added to the total: sgd (momentum: 1x the parameters), adam (2x)")
    memory.add_argument("--measure", action="store_true", help="also run the step for real and measure it")
    memory.add_argument("--checkpoint", action="store_true", help="advise modules to checkpoint to get under "
                        "--budget (without one: half the peak); when that is not enough, predict the peak with each "
                        "other lever on top of the plan: .grad freed once accumulated, autocast bfloat16, "
                        "micro-batches with gradient accumulation, the loss in chunks over the tokens, and the best "
                        "combination of them")
    memory.add_argument("--verify", action="store_true", help="with --checkpoint: apply the plan and each lever "
                        "predicted (the chunked loss where the logits of an nn.Linear head only reach "
                        "F.cross_entropy; else it says why not), measure, print predicted against measured; with "
                        "--world-size: check each row against PyTorch's tracker (on real gloo ranks up to 2, else on "
                        "the fake cluster)")
    memory.add_argument("--retain-graph", action="store_true", help="backward(retain_graph=True)")
    memory.add_argument("--world-size", metavar="N[,N...]", type=sizes,
                        help="a distributed job (FUNC wraps the model with fully_shard, DDP or parallelize_module, "
                        "or DDP over parallelize_module on a 2-D mesh): "
                        "forecast each rank's step at these world sizes, e.g. 8,64,512, on a fake cluster (fake "
                        "process group, fake tensors: nothing allocated); with --measure and one small world size, "
                        "also run that many real gloo ranks here")
    memory.add_argument("--what-if", metavar="FUNC[,FUNC...]", type=_funcs,
                        help="with --world-size: other FUNCs of the script (the job set up otherwise: "
                        "reshard_after_forward, mixed precision, DDP, DDP+TP, FSDP+TP), forecast side by side with "
                        "FUNC")
    memory.add_argument("--json", action="store_true", help="print JSON")
    memory.add_argument("--timeout", type=real(0.0, LONGEST_TIMEOUT_S, low_open=True), metavar="SECONDS",
                        help=f"the most the command may take: running FUNC, forecasting, measuring (default "
                        f"{MEMORY_SECONDS:g}); a FUNC that hangs is stopped there")
    memory.add_argument("-o", "--output", metavar="FILE.html", help="also write the step's graph in the "
                        "interactive viewer, its live bytes charted (with --measure: measured beside predicted; "
                        "with several --batch sizes: the last one's; with --world-size: rank 0's step at the first "
                        "world size, its collectives marked)")


def run_memory(args: argparse.Namespace) -> int:
    """Run the command: the step FUNC returns, forecast (and measured) in a worker; the report printed."""
    match = SCRIPT_TARGET.match(args.target)
    if match is None:
        raise TraceError(f"memory expects SCRIPT.py:FUNC, found {args.target!r}")
    if getattr(args, "world_size", None):
        from .memory_world import run_world_sizes

        return run_world_sizes(args, match["path"], match["func"])
    if getattr(args, "what_if", None):
        raise TraceError("--what-if compares setups of a distributed job: add --world-size N")
    batches: tuple[int | None, ...] = args.batch or (None,)
    budget = parse_budget(args.budget)
    if args.verify and not args.checkpoint:
        raise TraceError("--verify checks a checkpoint plan: add --checkpoint")
    if (args.measure or args.verify) and args.device == "meta":
        raise TraceError("--measure and --verify run the step for real: use a real --device (cpu, cuda)")
    if args.output and not args.output.lower().endswith(".html"):
        raise TraceError(f"-o writes the interactive viewer: end the name in .html, found {args.output!r}")
    try:
        check_script(Path(match["path"]))
        if args.output:
            check_output(Path(args.output))
    except FileProblem as e:
        raise TraceError(str(e)) from e
    request = {
        "target": args.target, "batches": tuple(batches), "seq_len": args.seq_len, "device": args.device,
        "dtype": args.dtype, "cast": args.cast, "policy": args.autocast_policy or "cuda",
        "optimizer": args.optimizer, "budget_bytes": budget, "measure": args.measure,
        "checkpoint": args.checkpoint, "verify": args.verify, "retain_graph": args.retain_graph,
        "output": args.output,
    }
    seconds = args.timeout or MEMORY_SECONDS
    try:
        report, plan, written = run_script_job(MEMORY_JOB, match["path"], match["func"], request, os.getcwd(),
                                                 seconds=seconds)
    except RunnerError as e:
        text = script_stopped(args.target, e, seconds)
        if e.kind in ("memory", "crash") and (args.batch or args.seq_len) and args.device != "meta":
            text += ("; at these sizes the step may not fit in this machine's memory: forecast it without "
                     "allocating anything with --device meta")
        raise TraceError(text) from e
    print(json.dumps(report, indent=2) if args.json else _text(report, plan))
    if written:
        print(f"wrote {written}", file=sys.stderr)
    return 0


def _funcs(text: str) -> tuple[str, ...]:
    """--what-if: function names of the script, comma-separated."""
    names = tuple(n.strip() for n in text.split(","))
    bad = [n for n in names if not n.isidentifier()]
    if bad:
        raise argparse.ArgumentTypeError(f"expected function names of the script, comma-separated, found "
                                         f"{', '.join(repr(b) for b in bad)}")
    return names


def parse_budget(text: str | None) -> int | None:
    """--budget as bytes (None without one); a TraceError says what a size looks like."""
    if text is None:
        return None
    try:
        return parse_bytes(text)
    except ValueError as e:
        raise TraceError(f"--budget: {e}") from e


def _text(report: dict[str, Any], plan: str | None) -> str:
    how = {"float32": "float32", "cast": f"cast to {report['dtype']}", "autocast": f"{report['dtype']} autocast"}
    where = "forecast on meta (nothing allocated)" if report["device"] == "meta" else f"on {report['device']}"
    lines = [f"memory of one step of {report['target']}: {where}, {how[report['precision']]}"]
    budget = report["budget_bytes"]
    header = ["batch", "predicted peak", "measured peak", "+ params/buffers/inputs",
              f"+ optimizer state ({report['optimizer']})", "total"]
    header += [f"fits {human_bytes(budget)}"] if budget else []
    table = [header]
    for e in report["batches"]:
        table.append([
            "as given" if e["batch"] is None else str(e["batch"]), human_bytes(e["predicted_peak_bytes"]),
            human_bytes(e["measured_peak_bytes"]) if "measured_peak_bytes" in e else "-",
            human_bytes(e["params_bytes"] + e["buffers_bytes"] + e["inputs_bytes"]), human_bytes(e["optimizer_bytes"]),
            human_bytes(e["total_bytes"])] + (["yes" if e["fits"] else "no"] if budget else []))
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in table]
    lines += _peak_lines(report["batches"][-1])
    if "largest_batch" in report:
        state = "no optimizer state" if report["optimizer"] == "none" else f"{report['optimizer']} state"
        found = report["largest_batch"]
        note = f" ({report['largest_batch_note']})" if "largest_batch_note" in report else ""
        text = "unknown" if found is None else "none, not even batch 1" if found == 0 else str(found)
        lines.append(f"largest batch that fits in {human_bytes(budget)} with {state}: {text}{note}")
    if plan is not None:
        lines.append(plan)
    lines.append(f"not modelled: {report['not_modelled']}")
    return "\n".join(lines)


def _peak_lines(entry: dict[str, Any]) -> list[str]:
    batch = "" if entry["batch"] is None else f" at batch {entry['batch']}"
    if entry["peak_node"] is None:
        where = "during the forward" if entry.get("peak_in_forward") else "at the end of the forward"
    else:
        module = entry["peak_module"] if entry["peak_module"] is not None else "no module"
        source = f", {entry['peak_source']}" if entry["peak_source"] else ""
        where = (f"while {entry['peak_op']} ({entry['peak_node']}) runs, in {module or '(root)'}{source}, "
                 f"backward step {entry['peak_step']} of {entry['steps']}")
    held = ", ".join(f"{m['module'] or '(root)' if m['module'] is not None else '(no module)'} "
                     f"{human_bytes(m['bytes'])}" for m in entry["at_peak"])
    # With the peak in the forward, the holders listed are those of the backward's own (lower) peak: say so.
    holders = (f"held at the backward's own peak ({human_bytes(entry['replay_backward_peak_bytes'])})"
               if entry.get("peak_in_forward") and "replay_backward_peak_bytes" in entry else "held at the peak")
    lines = [f"peak{batch}: {where}", f"{holders}: {held}"]
    rows = entry.get("by_node", ())
    gaps = [r for r in rows if r["measured_bytes"] != r["predicted_bytes"]]
    backward = sum(1 for r in rows if r["node"] is not None)  # the step numbers the timeline prints count these
    span = f"the end of the forward and {backward} backward step(s)" if backward < len(rows) else (
        f"{backward} backward step(s)")
    if gaps:
        worst = max(gaps, key=lambda r: abs(r["measured_bytes"] - r["predicted_bytes"]))
        what = "the end of the forward" if worst["node"] is None else (
            f"{worst['name']} ({worst['node']}, in {worst['module'] or '(root)'})")
        lines.append(f"measured against predicted, node by node ({span}): {len(gaps)} differ; "
                     f"most at {what}: predicted {human_bytes(worst['predicted_bytes'])}, measured "
                     f"{human_bytes(worst['measured_bytes'])} "
                     f"({worst['measured_bytes'] - worst['predicted_bytes']:+,} B)")
    elif "by_node" in entry:
        lines.append(f"measured against predicted, node by node ({span}): all agree")
    lines += [f"note: {n}" for n in entry["notes"]]
    return lines
