"""Chunking work to a memory budget, halving the chunk when memory runs out."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from gradcheck._devices import free_cached_memory, is_out_of_memory, requested_bytes_text

__all__ = ["ChunkStats", "OutOfMemory", "plan_chunk", "run_chunked", "human_bytes"]

# Intermediate tensors of one evaluation, as a multiple of its inputs plus outputs:
# a guess that keeps typical elementwise/matmul/MLP chunks inside the budget.
_WORKING_FACTOR = 4


def human_bytes(n: int) -> str:
    """A byte count as people read it: 512 B, 1.5 KiB, 256.0 MiB."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


@dataclass(slots=True)
class ChunkStats:
    """How a chunked run went: the chunk it ended with and how often it halved."""

    chunk_size: int
    item_bytes: int
    retries: int = 0

    @property
    def chunk_bytes(self) -> int:
        """Estimated working memory of one chunk."""
        return self.chunk_size * self.item_bytes


class OutOfMemory(Exception):
    """Memory ran out even with a chunk of one item; says what was asked for."""

    def __init__(self, stats: ChunkStats, asked: str | None, error: BaseException) -> None:
        super().__init__(str(error))
        self.stats = stats
        self.asked = asked
        self.message = (
            str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        )


def plan_chunk(
    *, budget_bytes: int, item_elements: int, itemsize: int, total: int, working_factor: int = _WORKING_FACTOR
) -> ChunkStats:
    """How many items fit one chunk under the budget (at least one, at most `total`).

    `working_factor` is the working memory of one item as a multiple of its elements.
    """
    item_bytes = max(1, item_elements * itemsize * working_factor)
    size = max(1, min(total, budget_bytes // item_bytes))
    return ChunkStats(chunk_size=size, item_bytes=item_bytes)


def run_chunked(
    total: int, stats: ChunkStats, work: Callable[[int, int], None], device: torch.device
) -> None:
    """Calls `work(start, stop)` over [0, total) in chunks, halving them on out-of-memory.

    Finished chunks are kept; only the one that ran out is retried, smaller.

    Raises:
        OutOfMemory: when a chunk of a single item still does not fit.
    """
    start = 0
    while start < total:
        stop = min(total, start + stats.chunk_size)
        try:
            work(start, stop)
        except Exception as e:  # noqa: BLE001 - re-raised below unless it is out-of-memory
            if not is_out_of_memory(e):
                raise
            free_cached_memory(device)
            if stats.chunk_size == 1:
                raise OutOfMemory(stats, requested_bytes_text(e), e) from e
            stats.chunk_size = max(1, stats.chunk_size // 2)
            stats.retries += 1
            continue
        start = stop
