"""The memory of a distributed job per rank, as the CLI reports it: forecast for each world size on a fake cluster.

Runs inside the CLI's script worker (`graphviz-app memory SCRIPT.py:FUNC
--world-size 8,64,512` names `distributed.world_sizes_job` by reference): the
person's FUNC is called there once per world size, inside a fake process group
of that size and FakeTensorMode, so nothing is allocated and one process stands
in for every rank.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..analysis.distributed import RankMemory, format_ranks
from ..model import human_bytes
from ..tracing.distributed.fake_cluster import forecast_world, largest_batch_world
from ..tracing.distributed.ranks import run_ranks
from .scripts import run_script

__all__ = ["world_sizes_report", "world_sizes_text", "world_sizes_job", "NOT_SHOWN_ON_CPU"]

NOT_SHOWN_ON_CPU = (
    "NCCL's own communication buffers and workspaces; CUDA streams that keep a buffer alive past its last use "
    "(FSDP2 all-gathers on a side stream); the caching allocator's rounding and fragmentation; the CUDA context "
    "(about 0.5-1 GiB per GPU)"
)


def world_sizes_report(path: Path, func: str, target: str, world_sizes: tuple[int, ...], *,
                       batches: tuple[int | None, ...] = (None,), budget_bytes: int | None = None,
                       measure: bool = False) -> dict[str, Any]:
    """Rank 0's step of `target` forecast at each world size (and batch per GPU): the report as `--json`
    prints it, one entry per world size and batch.

    With `budget_bytes`, `largest_batch` holds the largest batch per GPU whose
    total fits the budget at each world size (the total: the step's peak plus the
    rank's parameter shards, buffers, optimizer state and inputs).

    With `measure` (one world size), the job also runs on that many real gloo
    ranks on this machine (`run_ranks`), PyTorch's tracker following each rank's
    step: `measured` holds every rank's figures, `peak_rank` the largest.

    Raises:
        DistributedError: FUNC fails, returns no step, or builds a mesh the world size does not split; a real
            rank raises or the ranks do not finish.
    """
    def job() -> Any:
        return run_script(path, func, target)

    entries: list[dict[str, Any]] = []
    for n in world_sizes:
        for batch in batches:
            entry = forecast_world(job, world_size=n, where=target, batch=batch).to_dict()
            entries.append({"batch": batch, **entry})
    report: dict[str, Any] = {
        "target": target,
        "device": "meta",
        "world_sizes": entries,
        "not_modelled": NOT_SHOWN_ON_CPU,
    }
    if budget_bytes is not None:
        report["budget_bytes"] = budget_bytes
        report["largest_batch"] = [
            {"world_size": n, "batch": largest_batch_world(job, world_size=n, budget_bytes=budget_bytes, where=target)}
            for n in world_sizes]
    if measure:
        table = run_ranks(f"{path}:{func}", nprocs=world_sizes[0], with_torch_tracker=True)
        report["measured"] = [r.to_dict() for r in table.ranks]
        report["peak_rank"] = table.peak_rank
    return report


def world_sizes_text(report: dict[str, Any]) -> str:
    """The report as the CLI prints it: one row per world size, then what is not counted."""
    rows = [RankMemory(e["rank"], e["world_size"], e["strategy"], e["predicted_peak_bytes"], e["params_bytes"],
                       e["grads_bytes"], e["optimizer_bytes"], e["buffers_bytes"], e["inputs_bytes"],
                       e["buckets_bytes"]) for e in report["world_sizes"]]
    table_text = format_ranks(rows)
    if any(e["batch"] is not None for e in report["world_sizes"]):  # a batch column after the world size
        table_lines = table_text.splitlines()
        batches = ["batch"] + [str(e["batch"]) if e["batch"] is not None else "as given" for e in report["world_sizes"]]
        width = max(len(b) for b in batches)
        table_text = "\n".join(f"{b.ljust(width)}  {line}" for b, line in zip(batches, table_lines, strict=True))
    lines = [f"memory per rank of one step of {report['target']}: forecast on a fake cluster of each world size, "
             "fake tensors (nothing allocated); rank 0",
             table_text,
             "step peak: what the step itself holds at its peak; total: + the rank's parameter shards, buffers, "
             "optimizer state, inputs (and DDP's buckets)"]
    for found in report.get("largest_batch", ()):
        lines.append(f"largest batch per GPU that fits in {human_bytes(report['budget_bytes'])} at world size "
                     f"{found['world_size']}: {found['batch']}")
    notes = sorted({n for e in report["world_sizes"] for n in e["notes"]})
    lines += [f"note: {n}" for n in notes]
    if "measured" in report:
        forecast = report["world_sizes"][0]
        lines.append(f"measured on {len(report['measured'])} real gloo ranks (the tracker followed the same step):")
        table: list[tuple[str, ...]] = [("rank", "forecast total", "measured total", "tracker total",
                                         "measured step peak")]
        for m in report["measured"]:
            mark = " <- peak" if m["rank"] == report["peak_rank"] and len(report["measured"]) > 1 else ""
            table.append((str(m["rank"]), human_bytes(forecast["total_bytes"]), human_bytes(m["total_bytes"]),
                         f"{human_bytes(m['tracker_bytes'])} ({m['tracker']})" if m.get("tracker") else "-",
                         human_bytes(m["predicted_peak_bytes"]) + mark))
        widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in table]
    lines.append(f"not modelled: {report['not_modelled']}")
    return "\n".join(lines)


def world_sizes_job(path: str, func: str, target: str, world_sizes: list[int], cwd: str, measure: bool = False,
                    batches: tuple[int | None, ...] = (None,),
                    budget_bytes: int | None = None) -> tuple[dict[str, Any], str]:
    """`world_sizes_report` in the CLI's worker, with its text; `cwd` is the command's folder, where the script
    runs."""
    os.chdir(cwd)
    report = world_sizes_report(Path(path).resolve(), func, target, tuple(world_sizes), batches=tuple(batches),
                                budget_bytes=budget_bytes, measure=measure)
    return report, world_sizes_text(report)
