"""The memory of a distributed step, in one place: forecast any world size, compare setups, measure real ranks.

A rank's **total** is what it holds at the step's peak: the step's own peak
(activations, all-gathered parameters, gradients, collective buffers) plus its
parameter shards, buffers, optimizer state, inputs and DDP's buckets
(`RankMemory.total_bytes`); a budget (`largest_batch_world`, `--budget`) is
compared with it. The guide is docs/distributed.md.
"""

from __future__ import annotations

from .analysis.distributed import (
    CollectiveEvent,
    FsdpUnit,
    RankMemory,
    RankTable,
    WhatIf,
    format_ranks,
    format_what_ifs,
)
from .analysis.distributed_replay import rank_timeline
from .model.ranks import RankInfo
from .tracing.distributed.fake_cluster import fake_cluster, forecast_world, forecast_worlds, largest_batch_world
from .tracing.distributed.rank_graph import RankGraph, trace_rank_step
from .tracing.distributed.rank_step import RankStep, rank_step
from .tracing.distributed.ranks import gather_ranks, measure_rank, run_ranks
from .tracing.distributed.what_if import what_if

__all__ = [
    "forecast_world", "forecast_worlds", "largest_batch_world", "what_if", "fake_cluster",
    "measure_rank", "gather_ranks", "run_ranks", "trace_rank_step", "rank_step",
    "RankStep", "RankMemory", "RankTable", "RankGraph", "CollectiveEvent", "WhatIf", "format_ranks",
    "format_what_ifs", "rank_timeline", "FsdpUnit", "RankInfo",
]
