"""`graphviz-app memory SCRIPT.py:FUNC --world-size 8,64,512`: a distributed job's memory per rank, forecast
(and, with `--world-size 2 --measure`, measured on that many real gloo ranks); `--what-if FUNC2,FUNC3` side by
side, `--verify` each row checked against PyTorch's tracker, `-o rank0.html` rank 0's step in the viewer.

This side parses and prints; FUNC runs in the script worker
(`graphviz_app.jobs.distributed`), once per world size, inside a fake process
group of that size.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from ..analysis.memory.fit import parse_bytes
from ..errors import TraceError
from ..runner import JobRef, RunnerError
from .files import FileProblem, check_output
from .worker import run_script_job, script_stopped

__all__ = ["DISTRIBUTED_JOB", "run_world_sizes"]

DISTRIBUTED_JOB = JobRef("graphviz_app.jobs.distributed", "world_sizes_job")
_MAX_REAL_RANKS = 8  # each rank is a process of its own on this machine
_ALONE = (("seq_len", "--seq-len"), ("checkpoint", "--checkpoint"), ("cast", "--cast"),
          ("retain_graph", "--retain-graph"))


def run_world_sizes(args: argparse.Namespace, path: str, func: str) -> int:
    """Forecast the job at each `--world-size` in the script worker; print the table (or `--json`)."""
    sizes = list(args.world_size)  # the parser made them whole numbers from 1 up
    given = [flag for attr, flag in _ALONE if getattr(args, attr, None)]
    if given:
        raise TraceError(f"--world-size forecasts the step as FUNC returns it; {', '.join(given)} cannot go with it "
                         "(to measure real ranks, run the script under torchrun with measure_rank, or run_ranks: "
                         "see docs/distributed.md)")
    if args.verify and (args.batch or args.budget or args.measure):
        raise TraceError("--verify with --world-size checks each row as FUNC returns it (on real gloo ranks up to 2, "
                         "else on the fake cluster): leave out --batch, --budget and --measure")
    what_ifs = tuple(args.what_if or ())
    if args.what_if and (args.batch or args.budget):
        raise TraceError("--what-if compares the setups as their FUNCs return them: leave out --batch and --budget")
    if args.measure and (args.batch or args.budget):
        raise TraceError("--measure with --world-size runs the step as FUNC returns it: leave out --batch and --budget")
    batches: tuple[int | None, ...] = tuple(args.batch) if args.batch else (None,)
    try:
        budget = parse_bytes(args.budget) if args.budget else None
    except ValueError as e:
        raise TraceError(f"--budget: {e}") from e
    if args.measure and (len(sizes) != 1 or sizes[0] > _MAX_REAL_RANKS):
        raise TraceError(f"--measure with --world-size runs that many real gloo ranks on this machine: give one "
                         f"world size of at most {_MAX_REAL_RANKS}, found {','.join(map(str, sizes))}")
    if args.device not in (None, "meta"):
        raise TraceError(f"--world-size forecasts on fake tensors (meta): leave out --device or give meta, found "
                         f"{args.device!r}")
    if args.dtype != "float32" or args.optimizer != "none":
        raise TraceError("--world-size takes the precision and optimizer from FUNC (MixedPrecisionPolicy, the "
                         "optimizer it returns): leave out --dtype and --optimizer")
    output = args.output
    if output:
        if not output.lower().endswith(".html"):
            raise TraceError(f"-o writes the interactive viewer of rank 0's step: end the name in .html, found "
                             f"{output!r}")
        try:
            check_output(Path(output))
        except FileProblem as e:
            raise TraceError(str(e)) from e
    seconds = args.timeout or 1800.0
    try:
        report, text = run_script_job(DISTRIBUTED_JOB, path, func, args.target, sizes, os.getcwd(), bool(args.measure),
                                      tuple(batches), budget, what_ifs, bool(args.verify), output, seconds=seconds)
    except RunnerError as e:
        raise TraceError(script_stopped(args.target, e, seconds)) from e
    print(json.dumps(report, indent=2) if args.json else text)
    if output:
        print(f"wrote {output}", file=sys.stderr)
    return 0
