"""Check a forecast row against PyTorch's own tracker: on real gloo ranks where the world fits this machine,
else on the fake cluster of that size (FSDPMemTracker / MemTracker following the same fake step)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...analysis.distributed import RankMemory, Verified
from ...errors import DistributedError
from ...model import human_bytes
from .fake_cluster import forecast_world
from .ranks import run_ranks

__all__ = ["REAL_RANKS_UP_TO", "verify_world"]

REAL_RANKS_UP_TO = 2  # real gloo ranks are processes of their own: this many at most on a small machine


def verify_world(target: str, func: Callable[[], Any], *, world_size: int, timeout_s: float = 600.0) -> Verified:
    """Rank 0's total at `world_size` as PyTorch's tracker sees it: on `world_size` real gloo ranks started here
    (`run_ranks`, `target` is SCRIPT.py:FUNC) when it is at most REAL_RANKS_UP_TO, else with the tracker
    following the step on a fake cluster of that size (`func` is the FUNC, called there).

    Raises:
        DistributedError: a rank raised, did not finish, or the step cannot run on fake tensors (DDP with
            `find_unused_parameters=True` beyond REAL_RANKS_UP_TO ranks).
    """
    if world_size <= REAL_RANKS_UP_TO:
        table = run_ranks(target, nprocs=world_size, with_torch_tracker=True, timeout_s=timeout_s)
        rank0: RankMemory = table.ranks[0]
        how = f"{world_size} real gloo rank(s), {rank0.tracker}{_buckets_seen_late(rank0)}"
        return Verified(how, rank0.tracker_bytes, rank0.total_bytes)
    rank0 = forecast_world(func, world_size=world_size, where=target, with_torch_tracker=True)
    if rank0.tracker_bytes is None:
        raise DistributedError(f"{target}: PyTorch's tracker gave no figure at world size {world_size}")
    return Verified(f"fake cluster of {world_size}, {rank0.tracker}{_buckets_seen_late(rank0)}",
                    rank0.tracker_bytes, None)


def _buckets_seen_late(rank0: RankMemory) -> str:
    """For DDP and DDP+TP, why the tracker may read below: it learns of each gradient bucket (DDP's reducer
    holds them, not the module) only when the bucket is all-reduced, so a peak earlier in backward lacks the
    buckets not yet reduced (seen with gradient_as_bucket_view=True, larger batches, and DDP+TP beyond 2 ranks)."""
    if not rank0.buckets_bytes:
        return ""
    return f" (sees each DDP bucket once all-reduced: up to {human_bytes(rank0.buckets_bytes)} below)"
