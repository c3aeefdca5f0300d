"""Real ranks: measure this rank's step in a running job, gather every rank's figures on rank 0, launch ranks.

Inside a job started by `torchrun` a script calls `measure_rank` then
`gather_ranks`; `run_ranks` starts the ranks itself (gloo, one process each,
at most a few on a CPU machine) and stops every one of them when one raises
or the time is up, so nothing is left waiting in a collective.
"""

from __future__ import annotations

import datetime
import importlib.util
import os
import queue
import socket
import sys
import traceback
from pathlib import Path
from typing import Any

import torch.distributed as dist
import torch.multiprocessing as mp

from ...analysis.distributed import RankMemory, RankTable, rank_table
from ...errors import DistributedError
from .rank_step import RankStep, rank_step, run_rank_step

__all__ = ["measure_rank", "gather_ranks", "run_ranks", "load_func"]


def measure_rank(result: Any, *, where: str = "FUNC", warmup: int | None = None,
                 with_torch_tracker: bool = False) -> RankMemory:
    """This rank's steady step, measured: `result` is a `RankStep` or what a FUNC returns (`rank_step`'s forms).

    Raises:
        DistributedError: no process group is initialised (start the job with torchrun, or use `run_ranks`).
    """
    if not dist.is_initialized():
        raise DistributedError("measure_rank runs inside a distributed job and no process group is initialised: "
                               "start the script with torchrun (it calls init_process_group), or use run_ranks")
    step = result if isinstance(result, RankStep) else rank_step(result, where)
    return run_rank_step(step, rank=dist.get_rank(), world_size=dist.get_world_size(), warmup=warmup,
                         with_torch_tracker=with_torch_tracker)


def gather_ranks(mine: RankMemory) -> RankTable | None:
    """Every rank's figures, gathered on rank 0 (a collective: every rank calls it); None on the other ranks."""
    rank = dist.get_rank()
    gathered: list[Any] | None = [None] * dist.get_world_size() if rank == 0 else None
    dist.gather_object(mine, gathered, dst=0)
    return rank_table([r for r in gathered if r is not None]) if gathered is not None else None


def load_func(target: str) -> Any:
    """The function `FUNC` of `SCRIPT.py:FUNC`, the script run as a module of its own.

    Raises:
        DistributedError: the target is not SCRIPT.py:FUNC, the script is missing or fails, or has no FUNC.
    """
    path, _, name = target.rpartition(":")
    if not path.endswith(".py") or not name.isidentifier():
        raise DistributedError(f"expected SCRIPT.py:FUNC, got {target!r}")
    file = Path(path)
    if not file.is_file():
        raise DistributedError(f"{path}: no such script")
    spec = importlib.util.spec_from_file_location(f"graphviz_app_rank_script_{file.stem}", file)
    if spec is None or spec.loader is None:
        raise DistributedError(f"{path}: cannot be loaded as a Python script")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses and pickling look the module up by name
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # noqa: BLE001 - the user's script: say which and why
        raise DistributedError(f"{path} failed while loading: {type(e).__name__}: {e}") from e
    func = getattr(module, name, None)
    if not callable(func):
        raise DistributedError(f"{path} has no function {name!r}")
    return func


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rank_main(rank: int, world_size: int, port: int, target: str, with_torch_tracker: bool, timeout_s: float,
               out: Any) -> None:
    """One rank: join the gloo group, run FUNC's step measured, gather on rank 0, report to the launcher."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world_size),
                      LOCAL_RANK=str(rank))
    try:
        dist.init_process_group("gloo", rank=rank, world_size=world_size,
                                timeout=datetime.timedelta(seconds=timeout_s))
        func = load_func(target)
        try:
            result = func()
        except Exception as e:  # noqa: BLE001 - the user's FUNC
            raise DistributedError(f"{target} failed on rank {rank}: {type(e).__name__}: {e}") from e
        mine = measure_rank(result, where=target, with_torch_tracker=with_torch_tracker)
        table = gather_ranks(mine)
        out.put(("table", rank, table) if table is not None else ("done", rank, None))
    except BaseException as e:  # noqa: BLE001 - whatever a rank raises reaches the launcher as text
        text = str(e) if isinstance(e, DistributedError) else f"{type(e).__name__}: {e}"
        out.put(("error", rank, text + "\n" + "".join(traceback.format_exception(e)[-3:])))
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def run_ranks(target: str, *, nprocs: int = 2, timeout_s: float = 300.0,
              with_torch_tracker: bool = False) -> RankTable:
    """Start `nprocs` gloo ranks, each running `SCRIPT.py:FUNC`'s step measured; every rank's figures.

    Each rank is a fresh process (spawned) that loads the script and calls FUNC
    inside the process group, as torchrun would start it. When one rank raises,
    or the ranks have not finished in `timeout_s`, every rank is stopped.

    Raises:
        DistributedError: a rank raised (its rank and message), a rank died, or the time ran out.
    """
    if nprocs < 1:
        raise DistributedError(f"run_ranks needs at least one rank, got {nprocs}")
    load_func(target)  # a wrong target is said here, once, not by every rank
    context = mp.get_context("spawn")
    out = context.Queue()
    port = _free_port()
    procs = [context.Process(target=_rank_main, args=(r, nprocs, port, target, with_torch_tracker, timeout_s, out),
                             daemon=True) for r in range(nprocs)]
    for p in procs:
        p.start()
    deadline = datetime.datetime.now() + datetime.timedelta(seconds=timeout_s)
    table: RankTable | None = None
    finished: set[int] = set()
    try:
        while len(finished) < nprocs:
            left = (deadline - datetime.datetime.now()).total_seconds()
            if left <= 0:
                raise DistributedError(f"the {nprocs} ranks of {target} did not finish in {timeout_s:g} s: every "
                                       "rank was stopped")
            try:
                kind, rank, value = out.get(timeout=min(left, 1.0))
            except queue.Empty:
                dead = [r for r, p in enumerate(procs) if p.exitcode not in (None, 0) and r not in finished]
                if dead:
                    raise DistributedError(f"rank {dead[0]} of {target} died (exit code {procs[dead[0]].exitcode}) "
                                           "without a message: every rank was stopped") from None
                continue
            if kind == "error":
                raise DistributedError(f"rank {rank} of {target} raised: {value.strip()}\nevery rank was stopped")
            finished.add(rank)
            if kind == "table":
                table = value
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
                p.join(timeout=30)
        out.close()
    if table is None:
        raise DistributedError(f"rank 0 of {target} sent no table")
    return table
