"""A rank's step as a graph: DTensor ops sized as the rank's local shards, FSDP units described, and each backward
collective placed at the backward node running when it was issued."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from ...analysis.distributed import FsdpUnit, RankMemory
from ...analysis.memory import MeasuredMemory, MemoryStep
from ...model import Graph, NodeKind
from ..big_stack import call_with_large_stack
from ..memory.reentrant import name_reentrant_blocks
from ..memory.step import step_outputs
from ..memory.temporaries import OpBytes, mark_op_bytes, watch_op_bytes
from ..module_trace import given_tensors
from ..param_owners import all_named_params, first_names
from ..recorder import record
from ..torch_internals import fake_tensor_api, fsdp_units
from ..walker import Walker, WalkOptions
from .counting import RankStorages
from .rank_step import RankStep, run_rank_step
from .shards import is_dtensor, local_part, rank_parameters, sharding_text
from .spread import rank_info

__all__ = ["RankGraph", "RankTrace", "trace_rank_step", "traced_rank_step"]

_ACTIVE_FAKE_MODE = fake_tensor_api()[3]


@dataclasses.dataclass(frozen=True)
class RankGraph:
    """A rank's step: its graph (DTensors as local shards, FSDP units marked) and its figures, whose backward
    collectives name the graph node (`CollectiveEvent.node`) running when each was issued; `units` are the
    step's FSDP units, which a replay of the graph (`rank_timeline`) needs."""

    graph: Graph
    memory: RankMemory
    roots: tuple[str, ...] = ()
    units: tuple[FsdpUnit, ...] = ()
    forward_peak_bytes: int = 0


@dataclasses.dataclass(frozen=True)
class RankTrace:
    """One forward and backward of a rank, traced and counted (`traced_rank_step`)."""

    graph: Graph
    roots: tuple[str, ...]
    measured: MeasuredMemory
    units: tuple[FsdpUnit, ...]
    counter: RankStorages


def _walk(step: RankStep, named: list[tuple[str, torch.Tensor]]) -> tuple[Graph, dict[str, Any]]:
    params = all_named_params(step.model)
    leaf_names = {id(t): (name, t) for name, t in first_names(params)}
    options = WalkOptions(
        leaf_names=leaf_names, root_module=step.model, module_params=params,
        module_param_ids=frozenset(leaf_names), given=given_tensors(step.model, step.args, step.kwargs),
    )
    with Walker(options, []) as walker:
        graph, fns = walker.walk(named), walker.fn_by_node_id()
    return name_reentrant_blocks(graph, fns, step.model), fns


_Local = tuple[tuple[int, ...], tuple[int, ...], str]  # first gradient's local shape, every one's bytes, layout


def _local_sizes(counter: RankStorages, node_id: str, local: dict[str, _Local],
                 found: OpBytes) -> Callable[[Any], None]:
    """For a DTensor op, keeps the local sizes of the gradients it receives (the sizes of its forward outputs on
    this rank), which autograd's metadata gives only globally. The node's interval is started by
    `watch_op_bytes`'s marker, which does nothing inside a reentrant checkpoint's nested backward."""
    def prehook(grad_outputs: Any) -> None:
        if found.inside:
            return
        grads = [g for g in grad_outputs if isinstance(g, torch.Tensor)]
        if grads and any(is_dtensor(g) for g in grads):
            counter.paused = True  # reading the local shard is no part of the step
            try:
                parts = [local_part(g) for g in grad_outputs if isinstance(g, torch.Tensor)]
                first = grads[0]
                local[node_id] = (tuple(parts[0].shape), tuple(p.numel() * p.element_size() for p in parts),
                                  sharding_text(first) if is_dtensor(first) else "")
            finally:
                counter.paused = False

    return prehook


def _localized(graph: Graph, local: dict[str, _Local]) -> Graph:
    """`graph` with each DTensor op's tensor as this rank's part of it: local shape and bytes, and the layout
    of the gradient it received as its `sharding`."""
    nodes = []
    for n in graph.nodes:
        found = local.get(n.id)
        if found is None or n.kind is not NodeKind.OP or n.tensor is None:
            nodes.append(n)
            continue
        shape, sizes, layout = found
        numel = 1
        for s in shape:
            numel *= s
        tensor = dataclasses.replace(n.tensor, shape=shape, numel=numel, bytes=sizes[0],
                                     sharding=f"gradient: {layout}" if layout else n.tensor.sharding)
        nodes.append(dataclasses.replace(n, tensor=tensor,
                                         output_bytes=sizes if n.output_bytes is not None else None))
    return dataclasses.replace(graph, nodes=tuple(nodes))


def _loss(step: RankStep, out: Any) -> tuple[Any, list[tuple[str, torch.Tensor]], list[str]]:
    if step.loss is not None:
        named, roots = step_outputs(step.loss(out))
        held = step_outputs(out)[0] if _has_graph(out) else []
        seen = {id(t) for _, t in named}
        return out, named + [(p, t) for p, t in held if id(t) not in seen], roots
    named, roots = step_outputs(out)
    return out, named, roots


def _has_graph(out: Any) -> bool:
    try:
        step_outputs(out)
    except Exception:  # noqa: BLE001 - an output with no tensor to hold
        return False
    return True


def _traced(step: RankStep, counter: RankStorages, optimizer: bool, retain_graph: bool,
            autocast: torch.dtype | None) -> tuple[Graph, tuple[str, ...], int]:
    counter.phase = "forward"
    devices = [t.device.type for t in given_tensors(step.model, step.args, step.kwargs)]
    cast = (torch.autocast(devices[0] if devices else "cpu", dtype=autocast) if autocast is not None
            else contextlib.nullcontext())
    with record(step.model), torch.enable_grad(), cast:
        out = step.model(*step.args, **step.kwargs)
        out, named, root_paths = _loss(step, out)
    forward_peak = counter.peak
    counter.paused = True  # the walk reads tensors; it is no part of the step
    graph, fns = _walk(step, named)
    local: dict[str, _Local] = {}
    op_bytes = OpBytes()
    handles = [fn.register_prehook(_local_sizes(counter, node_id, local, op_bytes)) for node_id, fn in fns.items()]
    handles += watch_op_bytes(counter, fns, graph, op_bytes)
    del fns
    roots = tuple(n.id for n in graph.nodes if n.kind is NodeKind.OUTPUT and n.name in root_paths)
    counter.paused = False
    tensors = [t for path, t in named if path in root_paths]
    grads = [torch.ones((), dtype=t.dtype, device=t.device).expand(t.shape) for t in tensors]
    counter.phase = "backward"
    counter.mark(None)
    try:
        torch.autograd.backward(tensors, grads, retain_graph=retain_graph)
    finally:
        for h in handles:
            h.remove()
    del tensors, grads, out, named
    counter.phase = "optimizer"
    if optimizer and step.optimizer is not None:
        step.optimizer.step()
        step.optimizer.zero_grad(set_to_none=True)
    return _localized(mark_op_bytes(graph, _reentrant_only(graph, op_bytes)), local), roots, forward_peak


def _reentrant_only(graph: Graph, found: OpBytes) -> OpBytes:
    """What the reentrant checkpoints' nodes made (their recomputed block's temporaries, their nested backward's
    `.grad`), which a rank's replay needs as a single process's does; other ops' temporaries are left out:
    `rank_timeline` models a rank's collective buffers itself, which they would count again (FSDP2's rank
    replays read 20% high with them)."""
    reentrant = {n.id for n in graph.nodes if n.name == "CheckpointFunctionBackward"}
    return OpBytes({k: v for k, v in found.temporaries.items() if k in reentrant}, found.nested, found.nested_leaves)


def traced_rank_step(step: RankStep, *, optimizer: bool = True, retain_graph: bool = False,
                     autocast: torch.dtype | None = None) -> RankTrace:
    """One forward and backward of `step` (and `optimizer.step()` with `optimizer`), traced and counted by
    `RankStorages`; the parameters' `.grad` are put back as they were.

    Runs on a big-stack thread, as `trace_model` does, inside the fake mode in force (a fake cluster's), so
    the step runs there as it would here. DTensor ops are sized as the rank's part of them. Inside a process
    group the graph carries the rank (`Graph.rank`: its collectives, each at the node that issued it, and its
    FSDP units), so `save(graph, "rank0.html")` marks them on the memory chart.
    """
    params = rank_parameters(step.model)
    kept = [p.grad for p in params]
    for p in params:  # a step starts from zero_grad(set_to_none=True)
        p.grad = None
    counter = RankStorages()
    mode = _ACTIVE_FAKE_MODE()
    units = fsdp_units(step.model)

    def run() -> tuple[Graph, tuple[str, ...], int]:
        with mode if mode is not None else contextlib.nullcontext(), counter:
            return _traced(step, counter, optimizer, retain_graph, autocast)

    try:
        graph, roots, forward_peak = call_with_large_stack(run)
    finally:
        for p, grad in zip(params, kept, strict=True):
            p.grad = grad
    steps = tuple(MemoryStep(label, before, peak, after) for label, before, peak, after in counter.marks)
    device = next((str(local_part(p).device) for p in params), "cpu")
    measured = MeasuredMemory(steps, counter.peak, forward_peak, "storages", device)
    fsdp = tuple(FsdpUnit(*u) for u in units)
    if dist.is_available() and dist.is_initialized():
        graph = dataclasses.replace(graph, rank=rank_info(step.model, dist.get_rank(), dist.get_world_size(),
                                                          counter.events, fsdp))
    return RankTrace(graph, roots, measured, fsdp, counter)


def trace_rank_step(step: RankStep, *, rank: int = 0, world_size: int = 1) -> RankGraph:
    """This rank's steady step traced and counted: one warm-up step, the figures of `run_rank_step`, then one
    more step traced, whose backward collectives are placed on the graph's nodes.

    Works inside a real job (pass `dist.get_rank()`, `dist.get_world_size()`) and on a fake cluster.
    """
    memory = run_rank_step(step, rank=rank, world_size=world_size)
    trace = traced_rank_step(step)
    for p in rank_parameters(step.model):
        p.grad = None
    graph = dataclasses.replace(trace.graph, rank=rank_info(step.model, rank, world_size, trace.counter.events,
                                                            trace.units))
    return RankGraph(graph, dataclasses.replace(memory, collectives=tuple(trace.counter.events)),
                     trace.roots, trace.units, trace.measured.forward_peak_bytes)
