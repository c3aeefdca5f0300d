"""How a model is spread over ranks (DDP, FSDP2, TP, FSDP+TP), and the record of a rank a traced graph carries."""

from __future__ import annotations

import sys
from collections.abc import Sequence

import torch
import torch.distributed as dist

from ...analysis.distributed import CollectiveEvent, FsdpUnit
from ...model import RankInfo
from ..torch_internals.ddp import ddp_local_spec
from .shards import is_dtensor, rank_parameters

__all__ = ["DDP_STRATEGIES", "strategy_of", "spread_over_ranks", "rank_info"]

DDP_STRATEGIES = ("DDP", "DDP+TP")  # the strategies whose gradients DDP all-reduces in buckets


def strategy_of(model: torch.nn.Module) -> str:
    """How the model is spread over ranks: "DDP", "DDP+TP" (DDP over the "dp" slice of a 2-D mesh whose other
    dimension `parallelize_module` shards), "FSDP2", "TP", "FSDP+TP", or "replicated" (none of them)."""
    if isinstance(model, torch.nn.parallel.DistributedDataParallel):
        # DDP+TP: DDP holds each DTensor parameter as a parameter of its local shard, the DTensor's spec kept on it
        tp = any(ddp_local_spec(p) is not None or is_dtensor(p) for p in rank_parameters(model))
        return "DDP+TP" if tp else "DDP"
    fsdp = _fsdp_module_type()
    has_fsdp = fsdp is not None and any(isinstance(m, fsdp) for m in model.modules())
    meshes = {p.device_mesh.ndim for p in model.parameters() if is_dtensor(p)}  # type: ignore[attr-defined]
    if has_fsdp:
        return "FSDP+TP" if meshes and max(meshes) > 1 else "FSDP2"
    return "TP" if meshes else "replicated"


def spread_over_ranks(model: torch.nn.Module) -> bool:
    """Whether `model` is a rank's part of a distributed model (DDP, FSDP2, DTensor parameters) in an initialised
    process group (a real job's or a fake cluster's); a plain model in a rank is measured as a single process."""
    return dist.is_available() and dist.is_initialized() and strategy_of(model) != "replicated"


def rank_info(model: torch.nn.Module, rank: int, world_size: int, events: Sequence[CollectiveEvent],
              units: Sequence[FsdpUnit]) -> RankInfo:
    """What a rank's graph carries of its rank (`Graph.rank`): which rank, how `model` is spread, its collectives
    and FSDP units, and whether DDP's gradients are views of its buckets."""
    ddp = isinstance(model, torch.nn.parallel.DistributedDataParallel)
    return RankInfo(rank, world_size, strategy_of(model), tuple(events), tuple(units),
                    grads_in_buckets=ddp and bool(model.gradient_as_bucket_view))


def _fsdp_module_type() -> type | None:
    module = sys.modules.get("torch.distributed.fsdp")
    return getattr(module, "FSDPModule", None) if module is not None else None
