"""`trace_model` inside a process group: the forward's collectives and the FSDP units, put on the graph as its rank."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
import torch.distributed as dist

from ...analysis.distributed import FsdpUnit
from ...model import Graph
from ..torch_internals import fsdp_units
from .counting import RankStorages
from .spread import rank_info, spread_over_ranks

__all__ = ["ForwardInRank", "forward_in_rank"]


class ForwardInRank:
    """Around a rank's forward (`with`): the collectives it runs, counted by `RankStorages`; `on(graph)` then
    gives the traced graph with its rank (`Graph.rank`), so `save(graph, "rank0.html")` marks them."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.model = model
        self.units = tuple(FsdpUnit(*u) for u in fsdp_units(model))  # read before the forward, as a step reads them
        self.counter = RankStorages()

    def __enter__(self) -> ForwardInRank:
        self.counter.phase = "forward"
        self.counter.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.counter.__exit__(*exc)

    def on(self, graph: Graph) -> Graph:
        """`graph` with this rank's collectives and FSDP units as its `rank`."""
        info = rank_info(self.model, dist.get_rank(), dist.get_world_size(), self.counter.events, self.units)
        return dataclasses.replace(graph, rank=info)


def forward_in_rank(model: torch.nn.Module) -> ForwardInRank | None:
    """A `ForwardInRank` for a model spread over ranks inside a process group; None for any other."""
    return ForwardInRank(model) if spread_over_ranks(model) else None
