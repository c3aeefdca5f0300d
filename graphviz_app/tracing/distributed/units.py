"""FSDP units as module boxes: a module `fully_shard` wrapped is named by its own class, marked as a unit."""

from __future__ import annotations

import sys

import torch

from .shards import is_dtensor

__all__ = ["FSDP_UNIT", "module_type_name", "local_param_bytes"]

FSDP_UNIT = "FSDP unit"


def module_type_name(module: torch.nn.Module) -> str:
    """The class name a module box shows: `Block (FSDP unit)` for a module `fully_shard` wrapped (its class is
    then `FSDPBlock`, made on the fly), the class name for any other.

    >>> module_type_name(torch.nn.Linear(2, 2))
    'Linear'
    """
    cls = type(module)
    fsdp = sys.modules.get("torch.distributed.fsdp")
    if fsdp is None or not isinstance(module, fsdp.FSDPModule):
        return cls.__name__
    own = next((base for base in cls.__bases__ if base is not fsdp.FSDPModule), cls)
    return f"{own.__name__} ({FSDP_UNIT})"


def local_param_bytes(param: torch.Tensor) -> int:
    """The bytes this rank holds of a parameter: a DTensor's local shard, any other parameter whole."""
    if is_dtensor(param):
        local = param.to_local()  # type: ignore[attr-defined]
        return int(local.numel() * local.element_size())
    return param.numel() * param.element_size()
