"""`graphviz-app memory SCRIPT.py:FUNC --world-size 8,64,512`: a distributed job's memory per rank, forecast.

This side parses and prints; FUNC runs in the script worker
(`graphviz_app.jobs.distributed`), once per world size, inside a fake process
group of that size.
"""

from __future__ import annotations

import argparse
import json
import os

from ..errors import TraceError
from ..runner import JobRef, RunnerError
from .worker import run_script_job, script_stopped

__all__ = ["DISTRIBUTED_JOB", "world_sizes", "run_world_sizes"]

DISTRIBUTED_JOB = JobRef("graphviz_app.jobs.distributed", "world_sizes_job")
_ALONE = (("batch", "--batch"), ("seq_len", "--seq-len"), ("budget", "--budget"), ("measure", "--measure"),
          ("checkpoint", "--checkpoint"), ("verify", "--verify"), ("output", "-o"), ("cast", "--cast"),
          ("retain_graph", "--retain-graph"))


def world_sizes(text: str) -> list[int]:
    """`--world-size 8,64,512` as numbers; a TraceError says what is expected.

    >>> world_sizes("8, 64,512")
    [8, 64, 512]
    """
    try:
        sizes = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        sizes = []
    if not sizes or any(s < 1 for s in sizes):
        raise TraceError(f"--world-size expects numbers of ranks separated by commas, e.g. 8,64,512; found {text!r}")
    return sizes


def run_world_sizes(args: argparse.Namespace, path: str, func: str) -> int:
    """Forecast the job at each `--world-size` in the script worker; print the table (or `--json`)."""
    sizes = world_sizes(args.world_size)
    given = [flag for attr, flag in _ALONE if getattr(args, attr, None)]
    if given:
        raise TraceError(f"--world-size forecasts the step as FUNC returns it; {', '.join(given)} cannot go with it "
                         "(to measure real ranks, run the script under torchrun with measure_rank, or run_ranks: "
                         "see docs/distributed.md)")
    if args.device not in (None, "meta"):
        raise TraceError(f"--world-size forecasts on fake tensors (meta): leave out --device or give meta, found "
                         f"{args.device!r}")
    if args.dtype != "float32" or args.optimizer != "none":
        raise TraceError("--world-size takes the precision and optimizer from FUNC (MixedPrecisionPolicy, the "
                         "optimizer it returns): leave out --dtype and --optimizer")
    seconds = args.timeout or 1800.0
    try:
        report, text = run_script_job(DISTRIBUTED_JOB, path, func, args.target, sizes, os.getcwd(), seconds=seconds)
    except RunnerError as e:
        raise TraceError(script_stopped(args.target, e, seconds)) from e
    print(json.dumps(report, indent=2) if args.json else text)
    return 0
