"""What a rank holds of a DTensor: its local shard, and the global shape and placement it is a part of.

Only tensors of programs that imported `torch.distributed.tensor` can be
DTensors, so the check costs one dictionary lookup for every other program.
"""

from __future__ import annotations

import sys
from typing import Any

import torch

from ..torch_internals import fsdp_unsharded_params
from ..torch_internals.ddp import ddp_dtensor_attributes, ddp_local_spec, ddp_parameters

__all__ = ["is_dtensor", "local_part", "sharding_text", "local_storage_bytes", "rank_parameters",
           "unlisted_named_parameters", "ShardLookup"]


def is_dtensor(t: Any) -> bool:
    """Whether `t` is a DTensor (False without importing torch.distributed when no program did)."""
    module = sys.modules.get("torch.distributed.tensor")
    if module is None or type(t) is torch.Tensor or type(t) is torch.nn.Parameter:
        return False
    return isinstance(t, module.DTensor)


def local_part(t: torch.Tensor) -> torch.Tensor:
    """The tensor this rank holds of `t`: a DTensor's local shard, any other tensor itself."""
    return t.to_local() if is_dtensor(t) else t  # type: ignore[attr-defined]


def sharding_text(t: torch.Tensor) -> str:
    """How a DTensor is laid out, as people read it: placements, global shape, mesh.

    e.g. `Shard(dim=0) of (1024, 256) on mesh (dp=2)`.
    """
    return _layout_text(t.device_mesh, t.placements, t.shape)  # type: ignore[attr-defined]


def _layout_text(mesh: Any, placements: Any, shape: Any) -> str:
    names = mesh.mesh_dim_names
    dims = ", ".join(f"{n}={s}" if names else str(s) for n, s in zip(names or [""] * mesh.ndim, mesh.shape,
                                                                   strict=True))
    places = ", ".join(repr(p) for p in placements)
    text = "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"
    return f"{places} of {text} on mesh ({dims})"


def local_storage_bytes(tensors: Any) -> int:
    """The bytes of the distinct storages the rank holds for `tensors` (an iterable; DTensors by their shards)."""
    seen: dict[int, torch.UntypedStorage] = {}
    total = 0
    for t in tensors:
        if not isinstance(t, torch.Tensor):
            continue
        try:
            st = local_part(t).untyped_storage()
        except (RuntimeError, NotImplementedError):  # sparse and other storage-less tensors
            continue
        if id(st) not in seen:
            seen[id(st)] = st  # held so its id is not reused while counting
            total += st.nbytes()
    return total


def rank_parameters(model: torch.nn.Module) -> list[torch.nn.Parameter]:
    """The parameters this rank holds for `model`: `model.parameters()`, and for DDP the ones its reducer holds.

    They differ under DDP over a slice of a 2-D mesh (DDP with tensor
    parallelism): DDP turns the DTensor parameters into parameters of their local
    shards, and from the first forward on the module holds DTensors made from
    them as plain attributes, so `model.parameters()` yields none of them while
    they keep their storages, receive the gradients and are what the optimizer steps.
    """
    params = list(model.parameters())
    if isinstance(model, torch.nn.parallel.DistributedDataParallel):
        seen = {id(p) for p in params}
        params += [p for p in ddp_parameters(model) if id(p) not in seen]
    return params


def unlisted_named_parameters(model: torch.nn.Module) -> list[tuple[str, torch.Tensor]]:
    """(qualified name, parameter) for each parameter of `model` that `model.named_parameters()` does not yield:
    under DDP with tensor parallelism, the local parameters DDP made, from its first forward on, each named
    where the module holds the DTensor made from it (`module.0.up.weight`); [] for any other model."""
    if not isinstance(model, torch.nn.parallel.DistributedDataParallel) or \
            "torch.distributed.tensor" not in sys.modules:
        return []
    listed = {id(p) for p in model.parameters()}
    unlisted = {id(p) for p in ddp_parameters(model) if id(p) not in listed}
    if not unlisted:
        return []
    dtensor = sys.modules["torch.distributed.tensor"].DTensor
    return [(name, p) for name, p in ddp_dtensor_attributes(model, dtensor) if id(p) in unlisted]


class ShardLookup:
    """For a tracer: what this rank holds of a tensor, when it is a DTensor or one of FSDP2's unsharded parameters.

    Made once per walk; programs that never imported torch.distributed's tensor
    package pay one attribute test per tensor.
    """

    def __init__(self) -> None:
        self.active = "torch.distributed.tensor" in sys.modules
        self._fsdp: dict[int, tuple[Any, Any, str | None]] | None = None
        self._fsdp_storages: dict[int, tuple[Any, Any, str | None]] = {}

    def _unsharded(self) -> dict[int, tuple[Any, Any, str | None]]:
        if self._fsdp is None:
            self._fsdp = fsdp_unsharded_params()
            for hit in self._fsdp.values():  # under FSDP+TP a saved DTensor is a new object on the same storage
                if is_dtensor(hit[0]):
                    self._fsdp_storages[id(hit[0]._local_tensor.untyped_storage())] = hit
        return self._fsdp

    def find(self, t: torch.Tensor) -> tuple[torch.Tensor, str, str | None] | None:
        """(the local shard, how the whole is laid out, the parameter's name or None), or None for a plain tensor."""
        if not self.active:
            return None
        hit = None
        if t.is_leaf:  # FSDP's unsharded parameter (a DTensor itself under FSDP+TP): the sharded one is held
            hit = self._unsharded().get(id(t))
            hit = hit if hit is not None and hit[0] is t else None
        elif is_dtensor(t) and self._unsharded():
            hit = self._fsdp_storages.get(id(t._local_tensor.untyped_storage()))  # type: ignore[attr-defined]
        if hit is not None:
            sharded = hit[1]
            return (local_part(sharded).detach(),
                    f"{sharding_text(sharded)}; all-gathered (FSDP) while its unit runs", hit[2])
        if is_dtensor(t):
            return local_part(t).detach(), sharding_text(t), None
        spec = ddp_local_spec(t) if t.is_leaf else None
        if spec is not None:  # DDP with tensor parallelism: the local parameter DDP made of a DTensor parameter
            return t.detach(), f"{_layout_text(spec.mesh, spec.placements, spec.shape)}; its local shard, as DDP " \
                "holds it", None
        return None
