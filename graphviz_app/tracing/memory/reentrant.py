"""Reentrant checkpointing in a traced step: each checkpointed block's node put back in its module, with a note."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from typing import Any

import torch

from ...analysis.memory.op_bytes import REENTRANT_KEEPS_ATTR
from ...model import Graph, Node
from ...model.annotations import REENTRANT_ATTR
from ..torch_internals import storage_identity
from .counting import tensors_in
from .recompute import unseen_bytes

__all__ = ["name_reentrant_blocks", "mark_reentrant_keeps", "REENTRANT_NOTE"]

REENTRANT_NOTE = (REENTRANT_ATTR, "reentrant: the block's forward runs again, with a nested backward, inside this node")


def name_reentrant_blocks(graph: Graph, fns: Mapping[str, Any], model: torch.nn.Module) -> Graph:
    """`graph` with each reentrant checkpoint node (`CheckpointFunctionBackward`) put in the module it
    checkpoints (the function `checkpoint` was given: a module, or a module's bound method) and noted, so
    the block stays visible in module summaries, boxes and the memory timeline."""
    names = {id(m): name for name, m in model.named_modules()}
    changed: dict[str, Node] = {}
    for node in graph.nodes:
        if node.name != "CheckpointFunctionBackward" or node.id not in fns:
            continue
        run = getattr(fns[node.id], "run_function", None)
        owner = run if isinstance(run, torch.nn.Module) else getattr(run, "__self__", None)
        name = names.get(id(owner)) if owner is not None else None
        changed[node.id] = dataclasses.replace(node, module=name if name is not None else node.module,
                                               attrs=(*node.attrs, REENTRANT_NOTE))
    if not changed:
        return graph
    return dataclasses.replace(graph, nodes=tuple(changed.get(n.id, n) for n in graph.nodes))


def mark_reentrant_keeps(graph: Graph, fns: Mapping[str, Any], known_storage: Callable[[torch.Tensor], str | None],
                         given: tuple[torch.Tensor, ...] = ()) -> Graph:
    """`graph` with each reentrant checkpoint node marked with the bytes of the tensors it keeps inside its
    block's non-tensor arguments (`ctx.inputs`; a tuple of rotary cos and sin; the keyword arguments of a
    `functools.partial` it runs), where no graph node describes
    their storage and none existed before the step (`given`); each storage counted once, on the first node."""
    before = {storage_identity(t.untyped_storage()) for t in given}
    seen: set[int] = set()
    changed: dict[str, Node] = {}
    for node in graph.nodes:
        if node.name != "CheckpointFunctionBackward" or node.id not in fns:
            continue
        # torch's CheckpointFunction puts None for each tensor argument (those are saved tensors) and keeps
        # every other argument as given: tensors inside tuples, lists and dicts stay alive with it; so does
        # its function, a `functools.partial` with keyword arguments in transformers' checkpointed layers.
        fn = fns[node.id]
        kept = [a for a in getattr(fn, "inputs", None) or () if a is not None]
        run = getattr(fn, "run_function", None)
        if isinstance(run, functools.partial):
            kept += [run.args, run.keywords]
        total = unseen_bytes(tensors_in(kept), before, seen, known_storage)
        if total:
            changed[node.id] = dataclasses.replace(node, attrs=(*node.attrs, (REENTRANT_KEEPS_ATTR, str(total))))
    if not changed:
        return graph
    return dataclasses.replace(graph, nodes=tuple(changed.get(n.id, n) for n in graph.nodes))
