"""Reentrant checkpointing in a traced step: each checkpointed block's node put back in its module, with a note."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import torch

from ...model import Graph, Node

__all__ = ["name_reentrant_blocks", "REENTRANT_NOTE"]

REENTRANT_NOTE = ("checkpoint", "reentrant: the block's forward runs again, with a nested backward, inside this node")


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
