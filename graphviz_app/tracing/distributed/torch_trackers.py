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

__all__ = ["torch_tracker", "TrackerPeak"]


class TrackerPeak:
    """Filled when the tracker's block ends: the tracker's name and its peak "Total" (bytes, every category)."""

    name: str = ""
    total_bytes: int | None = None


@contextlib.contextmanager
def torch_tracker(model: torch.nn.Module, optimizer: torch.optim.Optimizer | None,
                  inputs: list[torch.Tensor]) -> Iterator[TrackerPeak]:
    """Inside the block, torch's tracker follows a step of `model`, `optimizer` and `inputs`; its peak comes out
    in the yielded record at the end."""
    from torch.distributed.fsdp import FSDPModule

    from ..torch_internals import memory_trackers
    from .shards import rank_parameters

    FSDPMemTracker, MemTracker = memory_trackers()

    peak = TrackerPeak()
    tracker: Any
    if isinstance(model, FSDPModule):
        tracker, peak.name = FSDPMemTracker(model, optimizer), "FSDPMemTracker"
        tracker.track_inputs(tuple(inputs))
    else:
        tracker, peak.name = MemTracker(), "MemTracker"
        # MemTracker knows a model's parameters from `model.parameters()`; DDP with tensor parallelism holds its
        # local parameters elsewhere (`rank_parameters`), and without them MemTracker notices each only when an
        # op first touches it (a bias untouched until the optimizer step was missing from its peak: 256 bytes).
        known = {id(p) for p in model.parameters()}
        held = [p for p in rank_parameters(model) if id(p) not in known]
        tracker.track_external(model, *held, *([optimizer] if optimizer is not None else []), *inputs)
    with tracker:
        yield peak
    snapshot = tracker.get_tracker_snapshot("peak")
    peak.total_bytes = int(sum(per_device["Total"] for device, per_device in snapshot.items()
                               if isinstance(device, torch.device)))
