"""A rank's step as a graph, with each backward collective placed at the backward node running when it was issued."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from ...analysis.distributed import RankMemory
from ...model import Graph
from ..big_stack import call_with_large_stack
from ..memory.step import step_outputs
from ..module_trace import given_tensors
from ..param_owners import all_named_params, first_names
from ..recorder import record
from ..walker import Walker, WalkOptions
from .counting import RankStorages
from .rank_step import RankStep, run_rank_step

__all__ = ["RankGraph", "trace_rank_step"]


@dataclasses.dataclass(frozen=True)
class RankGraph:
    """A rank's step: its graph (DTensors as local shards, FSDP units marked) and its figures, whose backward
    collectives name the graph node (`CollectiveEvent.node`) running when each was issued."""

    graph: Graph
    memory: RankMemory


def _walk(step: RankStep, named: list[tuple[str, torch.Tensor]]) -> tuple[Graph, dict[str, Any]]:
    params = all_named_params(step.model)
    leaf_names = {id(t): (name, t) for name, t in first_names(params)}
    options = WalkOptions(
        leaf_names=leaf_names, root_module=step.model, module_params=params,
        module_param_ids=frozenset(leaf_names), given=given_tensors(step.model, step.args, step.kwargs),
    )
    with Walker(options, []) as walker:
        return walker.walk(named), walker.fn_by_node_id()


def _marker(counter: RankStorages, node_id: str) -> Any:
    def prehook(grad_outputs: Any) -> None:
        counter.mark(node_id)

    return prehook


def _traced_step(step: RankStep, counter: RankStorages) -> Graph:
    counter.phase = "forward"
    with record(step.model), torch.enable_grad():
        out = step.model(*step.args, **step.kwargs)
        if step.loss is not None:
            out = step.loss(out)
    named, roots = step_outputs(out)
    counter.paused = True  # the walk reads tensors; it is no part of the step
    graph, fns = _walk(step, named)
    handles = [fn.register_prehook(_marker(counter, node_id)) for node_id, fn in fns.items()]
    del fns
    counter.paused = False
    tensors = [t for path, t in named if path in roots]
    loss = tensors[0] if len(tensors) == 1 and tensors[0].dim() == 0 else sum(t.sum() for t in tensors)
    del out, named, tensors
    counter.phase = "backward"
    counter.mark(None)
    try:
        loss.backward()  # type: ignore[union-attr]
    finally:
        for h in handles:
            h.remove()
    del loss
    counter.phase = "optimizer"
    if step.optimizer is not None:
        step.optimizer.step()
        step.optimizer.zero_grad(set_to_none=True)
    for p in step.model.parameters():
        p.grad = None
    return graph


def trace_rank_step(step: RankStep, *, rank: int = 0, world_size: int = 1) -> RankGraph:
    """This rank's steady step traced and counted: one warm-up step, the figures of `run_rank_step`, then one
    more step traced, whose backward collectives are placed on the graph's nodes.

    Works inside a real job (pass `dist.get_rank()`, `dist.get_world_size()`) and on a fake cluster.
    """
    memory = run_rank_step(step, rank=rank, world_size=world_size)
    counter = RankStorages()

    def run() -> Graph:
        with counter:
            return _traced_step(step, counter)

    graph = call_with_large_stack(run)
    return RankGraph(graph, dataclasses.replace(memory, collectives=tuple(counter.events)))
