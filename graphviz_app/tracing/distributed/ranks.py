"""Real ranks: measure this rank's step in a running job, gather every rank's figures on rank 0, launch ranks.

Inside a job started by `torchrun` a script calls `measure_rank` then
`gather_ranks`; `run_ranks` starts the ranks itself (gloo, one process each,
at most a few on a CPU machine) and stops every one of them when one raises
or the time is up, so nothing is left waiting in a collective.
"""

from __future__ import annotations

import datetime
import importlib
import importlib.util
import os
import pickle
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import torch.distributed as dist

from ...analysis.distributed import RankMemory, RankTable, rank_table
from ...errors import DistributedError
from .rank_step import RankStep, rank_step, run_rank_step

__all__ = ["measure_rank", "gather_ranks", "run_ranks", "call_ranks", "load_func", "rank_process"]


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


def _measured(result: Any, target: str, with_torch_tracker: bool) -> RankTable | None:
    """What `run_ranks` does on each rank: measure the step, gather every rank's figures on rank 0."""
    return gather_ranks(measure_rank(result, where=target, with_torch_tracker=with_torch_tracker))


def _per_rank(name: str) -> Any:
    module, _, func = name.partition(":")
    return getattr(importlib.import_module(module), func)


def rank_process(rank: int, world_size: int, port: int, target: str, with_torch_tracker: bool, timeout_s: float,
                 out: Path, per_rank: str = "") -> None:
    """One rank (a process of its own): join the gloo group, call FUNC, hand its result to `per_rank` ("module:
    function", called as function(result, target, with_torch_tracker); default: measure the step and gather on
    rank 0), and write what it returned for the launcher to `out` (pickled: ("value" | "error", rank, value))."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world_size),
                      LOCAL_RANK=str(rank))
    message: tuple[str, int, Any]
    try:
        dist.init_process_group("gloo", rank=rank, world_size=world_size,
                                timeout=datetime.timedelta(seconds=timeout_s))
        func = load_func(target)
        try:
            result = func()
        except Exception as e:  # noqa: BLE001 - the user's FUNC
            raise DistributedError(f"{target} failed on rank {rank}: {type(e).__name__}: {e}") from e
        use = _per_rank(per_rank) if per_rank else _measured
        message = ("value", rank, use(result, target, with_torch_tracker))
    except BaseException as e:  # noqa: BLE001 - whatever a rank raises reaches the launcher as text
        text = str(e) if isinstance(e, DistributedError) else f"{type(e).__name__}: {e}"
        message = ("error", rank, text + "\n" + "".join(traceback.format_exception(e)[-3:]))
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    partial = out.with_suffix(".part")
    partial.write_bytes(pickle.dumps(message))
    partial.replace(out)  # whole or not at all: the launcher reads it once it exists


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=30)


def run_ranks(target: str, *, nprocs: int = 2, timeout_s: float = 300.0,
              with_torch_tracker: bool = False) -> RankTable:
    """Start `nprocs` gloo ranks, each running `SCRIPT.py:FUNC`'s step measured; every rank's figures.

    Each rank is a fresh Python process (as torchrun starts them, on this
    machine's loopback) that loads the script and calls FUNC inside the process
    group. When one rank raises, or the ranks have not finished in `timeout_s`,
    every rank is stopped. Works from any process, a daemon worker included.

    Raises:
        DistributedError: a rank raised (its rank and message), a rank died, or the time ran out.
    """
    table = call_ranks(target, nprocs=nprocs, timeout_s=timeout_s, with_torch_tracker=with_torch_tracker)[0]
    if not isinstance(table, RankTable):
        raise DistributedError(f"rank 0 of {target} sent no table")
    return table


def call_ranks(target: str, *, per_rank: str = "", nprocs: int = 2, timeout_s: float = 300.0,
               with_torch_tracker: bool = False) -> list[Any]:
    """Start `nprocs` gloo ranks, each calling `SCRIPT.py:FUNC` then `per_rank` ("module:function", importable by
    the ranks; called as function(result, target, with_torch_tracker)) on what it returned; each rank's answer,
    by rank. The default `per_rank` measures the step and gathers the table on rank 0 (`run_ranks`).

    Raises:
        DistributedError: a rank raised (its rank and message), a rank died, or the time ran out.
    """
    if nprocs < 1:
        raise DistributedError(f"run_ranks needs at least one rank, got {nprocs}")
    load_func(target)  # a wrong target is said here, once, not by every rank
    port = _free_port()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))  # the same graphviz_app
    values: dict[int, Any] = {}
    with tempfile.TemporaryDirectory(prefix="graphviz-app-ranks-") as folder:
        outs = [Path(folder) / f"rank{r}.pickle" for r in range(nprocs)]
        logs = [(Path(folder) / f"rank{r}.log").open("wb") for r in range(nprocs)]
        procs = [subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(r), str(nprocs), str(port), target, str(int(with_torch_tracker)),
             str(timeout_s), str(outs[r]), per_rank], env=env, stdin=subprocess.DEVNULL, stdout=logs[r],
            stderr=subprocess.STDOUT) for r in range(nprocs)]
        deadline = time.monotonic() + timeout_s
        try:
            while len(values) < nprocs:
                if time.monotonic() > deadline:
                    raise DistributedError(f"the {nprocs} ranks of {target} did not finish in {timeout_s:g} s: "
                                           "every rank was stopped")
                for r, (p, out) in enumerate(zip(procs, outs, strict=True)):
                    if r in values:
                        continue
                    if out.exists():
                        kind, rank, value = pickle.loads(out.read_bytes())
                        if kind == "error":
                            raise DistributedError(f"rank {rank} of {target} raised: {value.strip()}\n"
                                                   "every rank was stopped")
                        values[r] = value
                    elif p.poll() is not None:
                        tail = Path(logs[r].name).read_text(errors="replace").strip().splitlines()[-3:]
                        raise DistributedError(f"rank {r} of {target} died (exit code {p.returncode}) without a "
                                               f"message: every rank was stopped; its last output: {' | '.join(tail)}")
                time.sleep(0.05)
        finally:
            _stop(procs)
            for log in logs:
                log.close()
    return [values[r] for r in range(nprocs)]


_CHILD = ("import sys\nfrom pathlib import Path\n"
          "from graphviz_app.tracing.distributed.ranks import rank_process\n"
          "a = sys.argv[1:]\n"
          "rank_process(int(a[0]), int(a[1]), int(a[2]), a[3], a[4] == '1', float(a[5]), Path(a[6]), a[7])\n")
