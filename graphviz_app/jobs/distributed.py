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
from ..tracing.distributed.fake_cluster import forecast_world
from .scripts import run_script

__all__ = ["world_sizes_report", "world_sizes_text", "world_sizes_job", "NOT_SHOWN_ON_CPU"]

NOT_SHOWN_ON_CPU = (
    "NCCL's own communication buffers and workspaces; CUDA streams that keep a buffer alive past its last use "
    "(FSDP2 all-gathers on a side stream); the caching allocator's rounding and fragmentation; the CUDA context "
    "(about 0.5-1 GiB per GPU)"
)


def world_sizes_report(path: Path, func: str, target: str, world_sizes: tuple[int, ...]) -> dict[str, Any]:
    """Rank 0's step of `target` forecast at each world size: the report as `--json` prints it.

    Raises:
        DistributedError: FUNC fails, returns no step, or builds a mesh the world size does not split.
    """
    entries: list[RankMemory] = [
        forecast_world(lambda: run_script(path, func, target), world_size=n, where=target) for n in world_sizes
    ]
    return {
        "target": target,
        "device": "meta",
        "world_sizes": [e.to_dict() for e in entries],
        "not_modelled": NOT_SHOWN_ON_CPU,
    }


def world_sizes_text(report: dict[str, Any]) -> str:
    """The report as the CLI prints it: one row per world size, then what is not counted."""
    rows = [RankMemory(e["rank"], e["world_size"], e["strategy"], e["predicted_peak_bytes"], e["params_bytes"],
                       e["grads_bytes"], e["optimizer_bytes"], e["buffers_bytes"], e["inputs_bytes"],
                       e["buckets_bytes"]) for e in report["world_sizes"]]
    lines = [f"memory per rank of one step of {report['target']}: forecast on a fake cluster of each world size, "
             "fake tensors (nothing allocated); rank 0",
             format_ranks(rows),
             "step peak: what the step itself holds at its peak; total: + the rank's parameter shards, buffers, "
             "optimizer state, inputs (and DDP's buckets)"]
    notes = sorted({n for e in report["world_sizes"] for n in e["notes"]})
    lines += [f"note: {n}" for n in notes]
    lines.append(f"not modelled: {report['not_modelled']}")
    return "\n".join(lines)


def world_sizes_job(path: str, func: str, target: str, world_sizes: list[int],
                    cwd: str) -> tuple[dict[str, Any], str]:
    """`world_sizes_report` in the CLI's worker, with its text; `cwd` is the command's folder, where the script
    runs."""
    os.chdir(cwd)
    report = world_sizes_report(Path(path), func, target, tuple(world_sizes))
    return report, world_sizes_text(report)
