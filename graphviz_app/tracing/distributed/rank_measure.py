"""`graphviz_app.memory.measure` inside a process group: the rank's step counted as a rank (local shards, FSDP2's
resized storages), and replayed with its FSDP units."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch

from ...analysis.distributed_replay import rank_timeline
from ...analysis.memory import MeasuredMemory, MemoryTimeline
from ...model import Graph
from .rank_graph import traced_rank_step
from .rank_step import RankStep

__all__ = ["measure_in_rank"]


def measure_in_rank(model: torch.nn.Module, args: tuple[Any, ...], kwargs: Mapping[str, Any], *,
                    loss: Callable[[Any], Any] | None = None, autocast: torch.dtype | None = None,
                    retain_graph: bool = False) -> tuple[Graph, MemoryTimeline, MeasuredMemory]:
    """One forward and backward of this rank, as `measure` defines it: the graph (DTensor ops as local shards,
    the rank's collectives and FSDP units on it as `Graph.rank`, so `save(graph, "rank0.html")` marks them), the
    replay of it with FSDP2's units (`rank_timeline`), and what `RankStorages` counted as it ran."""
    trace = traced_rank_step(RankStep(model, tuple(args), dict(kwargs), loss), optimizer=False,
                             retain_graph=retain_graph, autocast=autocast)
    view = trace.graph.rank is not None and trace.graph.rank.grads_in_buckets
    timeline = rank_timeline(trace.graph, units=trace.units, roots=trace.roots, retain_graph=retain_graph,
                             forward_peak_bytes=trace.measured.forward_peak_bytes, grads_in_buckets=view)
    return trace.graph, timeline, trace.measured
