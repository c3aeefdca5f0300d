"""PyTorch's own trackers around a rank's step: FSDPMemTracker for an FSDP model, MemTracker for any other.

The reference a rank's figures are checked against (`--verify`, the tests). Run
on the same step as our counter, at the same time, both see the same
allocations and frees, whatever order the collectives' timing gave them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from .rank_step import RankStep, _inputs

__all__ = ["torch_tracker", "TrackerPeak"]


class TrackerPeak:
    """Filled when the tracker's block ends: the tracker's name and its peak "Total" (bytes, every category)."""

    name: str = ""
    total_bytes: int | None = None


@contextlib.contextmanager
def torch_tracker(step: RankStep) -> Iterator[TrackerPeak]:
    """Inside the block, torch's tracker follows `step`'s model, optimizer and inputs; its peak comes out in the
    yielded record at the end."""
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
    from torch.distributed._tools.mem_tracker import MemTracker
    from torch.distributed.fsdp import FSDPModule

    peak = TrackerPeak()
    tracker: Any
    if isinstance(step.model, FSDPModule):
        tracker, peak.name = FSDPMemTracker(step.model, step.optimizer), "FSDPMemTracker"
        tracker.track_inputs(tuple(_inputs(step)))
    else:
        tracker, peak.name = MemTracker(), "MemTracker"
        tracker.track_external(step.model, *([step.optimizer] if step.optimizer is not None else []), *_inputs(step))
    with tracker:
        yield peak
    snapshot = tracker.get_tracker_snapshot("peak")
    peak.total_bytes = int(sum(per_device["Total"] for device, per_device in snapshot.items()
                               if isinstance(device, torch.device)))
