"""Which module owns each parameter, and what each module seen holds: `Graph.modules`."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

import torch

from ..model import ModuleInfo
from .distributed.shards import unlisted_named_parameters
from .distributed.units import local_param_bytes, module_type_name

__all__ = ["NamedParams", "owner_module", "all_named_params", "first_names", "module_infos"]

# (qualified name, parameter) for every place a parameter sits, tied weights once per place.
NamedParams = list[tuple[str, torch.Tensor]]


def owner_module(param_name: str) -> str:
    """The module that owns a parameter: `"layers.0.linear.weight"` -> `"layers.0.linear"`.

    >>> owner_module("layers.0.linear.weight"), owner_module("scale")
    ('layers.0.linear', '')
    """
    return param_name.rpartition(".")[0]


def all_named_params(root_module: torch.nn.Module) -> NamedParams:
    """Every (name, parameter) of `root_module`, a tied weight under each of its names; under DDP with tensor
    parallelism also the local parameters DDP holds, which the module stops listing after its first forward."""
    return list(root_module.named_parameters(remove_duplicate=False)) + unlisted_named_parameters(root_module)


def first_names(params: NamedParams) -> NamedParams:
    """One (name, parameter) per tensor, named as `named_parameters()` names it: first place."""
    seen: set[int] = set()
    unique: NamedParams = []
    for name, param in params:
        if id(param) not in seen:
            seen.add(id(param))
            unique.append((name, param))
    return unique


def module_infos(
    root_module: torch.nn.Module | None, seen: Mapping[str, str], params: NamedParams | None = None
) -> tuple[ModuleInfo, ...]:
    """One ModuleInfo per module seen (name -> class name), with its parents.

    Modules of `root_module` come first, in `named_modules()` order, with their
    parameter count and bytes (submodules included, a tensor once per
    module); names the root module does not know (class names, modules outside
    it) follow in the order seen. `params` is `all_named_params(root_module)`
    when the caller already has it.
    """
    wanted: set[str] = set()
    for name in seen:
        while name not in wanted:
            wanted.add(name)
            if not name:
                break
            name = name.rpartition(".")[0]
    infos: list[ModuleInfo] = []
    known: set[str] = set()
    if root_module is not None:
        totals = _param_totals(all_named_params(root_module) if params is None else params, wanted)
        for name, module in root_module.named_modules():
            if name in wanted and name not in known:
                known.add(name)
                infos.append(ModuleInfo(name, module_type_name(module), *totals.get(name, (0, 0))))
    for name, type_name in seen.items():
        if name not in known:
            infos.append(ModuleInfo(name, type_name))
    return tuple(infos)


def _param_totals(params: NamedParams, wanted: set[str]) -> dict[str, tuple[int, int]]:
    """(count, bytes) of the parameters under each wanted module, each tensor once per module.

    One pass over the parameters, adding each to its owner and the owner's
    parents (asking every module for its parameters() would walk the model
    once per module). Only tensors found in more than one place need the
    bookkeeping that counts them once.
    """
    places = Counter(id(p) for _, p in params)
    chains: dict[str, list[str]] = {}
    counted: set[tuple[str, int]] = set()
    totals: dict[str, list[int]] = {}
    for param_name, param in params:
        owner = owner_module(param_name)
        chain = chains.get(owner)
        if chain is None:
            chain = chains[owner] = _wanted_chain(owner, wanted)
        numel = param.numel()
        size = local_param_bytes(param)  # a rank's DTensor parameter: its local shard
        shared = places[id(param)] > 1
        for name in chain:
            if shared:
                if (name, id(param)) in counted:
                    continue
                counted.add((name, id(param)))
            total = totals.get(name)
            if total is None:
                totals[name] = [numel, size]
            else:
                total[0] += numel
                total[1] += size
    return {name: (count, size) for name, (count, size) in totals.items()}


def _wanted_chain(owner: str, wanted: set[str]) -> list[str]:
    """`owner` and its parents, innermost first, that are wanted."""
    chain = []
    name = owner
    while True:
        if name in wanted:
            chain.append(name)
        if not name:
            return chain
        name = name.rpartition(".")[0]
