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

from ..analysis.distributed import RankMemory, Verified, WhatIf, format_ranks, format_verified, format_what_ifs
from ..errors import DistributedError
from ..model import human_bytes
from ..tracing.distributed.fake_cluster import fake_cluster, forecast_world, largest_batch_world
from ..tracing.distributed.rank_graph import trace_rank_step
from ..tracing.distributed.rank_step import rank_step
from ..tracing.distributed.ranks import run_ranks
from ..tracing.distributed.verify import verify_world
from ..tracing.distributed.what_if import what_if
from ..viewer.html import viewer_html
from .scripts import run_script

__all__ = ["world_sizes_report", "world_sizes_text", "world_sizes_job", "write_rank_viewer", "NOT_SHOWN_ON_CPU"]

NOT_SHOWN_ON_CPU = (
    "NCCL's own communication buffers and workspaces; CUDA streams that keep a buffer alive past its last use "
    "(FSDP2 all-gathers on a side stream); the caching allocator's rounding and fragmentation; the CUDA context "
    "(about 0.5-1 GiB per GPU)"
)


def world_sizes_report(path: Path, func: str, target: str, world_sizes: tuple[int, ...], *,
                       batches: tuple[int | None, ...] = (None,), budget_bytes: int | None = None,
                       measure: bool = False, what_ifs: tuple[str, ...] = (),
                       verify: bool = False) -> dict[str, Any]:
    """Rank 0's step of `target` forecast at each world size (and batch per GPU): the report as `--json`
    prints it, one entry per world size and batch.

    With `budget_bytes`, `largest_batch` holds the largest batch per GPU whose
    total fits the budget at each world size (the total: the step's peak plus the
    rank's parameter shards, buffers, optimizer state and inputs).

    With `measure` (one world size), the job also runs on that many real gloo
    ranks on this machine (`run_ranks`), PyTorch's tracker following each rank's
    step: `measured` holds every rank's figures, `peak_rank` the largest.

    With `what_ifs` (other FUNCs of the script: the same job set up otherwise), `what_if` holds each
    setup's rank 0 beside FUNC's at each world size. With `verify`, each row (each setup, or FUNC at each
    world size) is checked by PyTorch's tracker (`verify_world`: real gloo ranks up to 2, else the fake
    cluster): `verified` holds predicted and verified totals.

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
    setups = (func, *what_ifs)
    if what_ifs:
        report["what_if"] = []
        for n in world_sizes:
            rows = what_if({name: _caller(path, name) for name in setups}, world_size=n)
            report["what_if"] += [{"world_size": n, "setup": r.label,
                                   **(r.memory.to_dict() if r.memory is not None else {"error": r.error})}
                                  for r in rows]
    if verify:
        report["verified"] = [_verified(path, name, n, report) for n in world_sizes
                              for name in (setups if what_ifs else (func,))]
    if measure:
        table = run_ranks(f"{path}:{func}", nprocs=world_sizes[0], with_torch_tracker=True)
        report["measured"] = [r.to_dict() for r in table.ranks]
        report["peak_rank"] = table.peak_rank
    return report


def _caller(path: Path, name: str) -> Any:
    def call() -> Any:
        return run_script(path, name, f"{path}:{name}")

    call.__name__ = name
    return call


def _verified(path: Path, name: str, world_size: int, report: dict[str, Any]) -> dict[str, Any]:
    """One row checked: its forecast total (None: it had none) beside the tracker's, or why it could not be."""
    rows = report.get("what_if") or [{"setup": name, **e} for e in report["world_sizes"] if e["batch"] is None]
    predicted = next((r.get("total_bytes") for r in rows if r["setup"] == name and r["world_size"] == world_size),
                     None)
    row: dict[str, Any] = {"world_size": world_size, "setup": name, "predicted_total_bytes": predicted}
    try:
        check = verify_world(f"{path}:{name}", _caller(path, name), world_size=world_size)
    except DistributedError as e:
        return {**row, "error": str(e).splitlines()[0]}
    return {**row, "method": check.method, "verified_total_bytes": check.tracker_bytes,
            "measured_total_bytes": check.measured_bytes}


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
    for n in sorted({r["world_size"] for r in report.get("what_if", ())}):
        setups = [r for r in report["what_if"] if r["world_size"] == n]
        lines.append(f"what if, at world size {n} (rank 0):")
        lines.append(format_what_ifs([_what_if_row(r) for r in setups]))
    if "verified" in report:
        lines.append("verified against PyTorch's tracker (rank 0's total):")
        lines.append(format_verified([(f"{r['setup']} @ {r['world_size']}", r["predicted_total_bytes"],
                                       _check(r), r.get("error")) for r in report["verified"]]))
    lines.append(f"not modelled: {report['not_modelled']}")
    return "\n".join(lines)


def _what_if_row(r: dict[str, Any]) -> WhatIf:
    if "error" in r:
        return WhatIf(r["setup"], None, r["error"])
    return WhatIf(r["setup"], RankMemory(r["rank"], r["world_size"], r["strategy"], r["predicted_peak_bytes"],
                                         r["params_bytes"], r["grads_bytes"], r["optimizer_bytes"], r["buffers_bytes"],
                                         r["inputs_bytes"], r["buckets_bytes"]))


def _check(r: dict[str, Any]) -> Verified | None:
    return None if "error" in r else Verified(r["method"], r["verified_total_bytes"], r["measured_total_bytes"])


def world_sizes_job(path: str, func: str, target: str, world_sizes: list[int], cwd: str, measure: bool = False,
                    batches: tuple[int | None, ...] = (None,), budget_bytes: int | None = None,
                    what_ifs: tuple[str, ...] = (), verify: bool = False,
                    output: str | None = None) -> tuple[dict[str, Any], str]:
    """`world_sizes_report` in the CLI's worker, with its text; `cwd` is the command's folder, where the script
    runs. With `output`, rank 0's step at the first world size is also written there in the viewer
    (`write_rank_viewer`)."""
    os.chdir(cwd)
    report = world_sizes_report(Path(path).resolve(), func, target, tuple(world_sizes), batches=tuple(batches),
                                budget_bytes=budget_bytes, measure=measure, what_ifs=tuple(what_ifs), verify=verify)
    if output:
        write_rank_viewer(Path(path).resolve(), func, target, world_sizes[0], Path(output))
    return report, world_sizes_text(report)


def write_rank_viewer(path: Path, func: str, target: str, world_size: int, output: Path) -> Path:
    """Rank 0's steady step of `target` on a fake cluster of `world_size`, traced (`trace_rank_step`) and written
    into the viewer at `output`: DTensors as local shards, its collectives marked on the memory chart."""
    with fake_cluster(world_size):
        traced = trace_rank_step(rank_step(run_script(path, func, target), target), rank=0, world_size=world_size)
    title = f"{target}: rank 0 of {world_size}"
    output.write_text(viewer_html(traced.graph, title=title, rank=traced.memory, units=traced.units),
                      encoding="utf-8")
    return output
