"""One rank's training step: forward, backward, optimizer step, counted as a single process's step is."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from ...analysis.distributed import RankMemory
from ...errors import DistributedError
from ..memory.step import step_outputs
from ..torch_internals import ddp_bucket_sizes, root_mesh
from ..torch_internals.ddp import ddp_local_spec
from .counting import RankStorages
from .shards import is_dtensor, local_storage_bytes, rank_parameters
from .spread import DDP_STRATEGIES, strategy_of

__all__ = ["RankStep", "rank_step", "train_step", "run_rank_step", "ddp_buckets", "check_meshes"]


@dataclass(frozen=True)
class RankStep:
    """What a rank runs: `model(*args, **kwargs)`, backward from its loss, then `optimizer.step()`.

    The loss is `loss(output)` when given, else the output by the rules of a
    single process's step (a scalar, the sum of a tensor, an output's `.loss`).
    """

    model: torch.nn.Module
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    loss: Callable[[Any], Any] | None = None
    optimizer: torch.optim.Optimizer | None = None


_FORMS = ("(model, x), (model, (x, y)), (model, args, kwargs), (model, x, optimizer) or {'model': ..., "
          "'args': (x,), 'kwargs': {...}, 'loss': lambda out: ..., 'optimizer': opt}")


def rank_step(result: Any, where: str = "FUNC") -> RankStep:
    """The step a FUNC's return value describes, in one of the forms `_FORMS` lists.

    >>> step = rank_step((torch.nn.Linear(2, 1), torch.ones(3, 2)))
    >>> step.args[0].shape, step.optimizer
    (torch.Size([3, 2]), None)
    """
    if isinstance(result, Mapping):
        unknown = sorted(set(result) - {"model", "args", "kwargs", "loss", "optimizer"})
        if "model" not in result or unknown:
            raise DistributedError(f"{where} returned a dict with keys {sorted(result)}: it needs 'model' and may "
                                   f"have 'args', 'kwargs', 'loss', 'optimizer'" +
                                   (f" (unknown: {', '.join(unknown)})" if unknown else ""))
        model, args, kwargs = result["model"], result.get("args", ()), result.get("kwargs", {})
        loss, optimizer = result.get("loss"), result.get("optimizer")
        args = args if isinstance(args, tuple) else (args,)
    elif isinstance(result, tuple) and len(result) in (2, 3):
        model, inputs, loss, optimizer, kwargs = result[0], result[1], None, None, {}
        args = inputs if isinstance(inputs, tuple) else (inputs,)
        if len(result) == 3:
            if isinstance(result[2], torch.optim.Optimizer):
                optimizer = result[2]
            elif isinstance(result[2], Mapping):
                kwargs = result[2]
            else:
                raise DistributedError(f"{where} returned {type(result[2]).__name__} third: return {_FORMS}")
    else:
        raise DistributedError(f"{where} returned {type(result).__name__}: return {_FORMS}")
    if not isinstance(model, torch.nn.Module):
        raise DistributedError(f"{where} returned a {type(model).__name__} as the model: return an nn.Module "
                               "(wrapped with fully_shard, DDP or parallelize_module as your training script does)")
    if optimizer is not None and not isinstance(optimizer, torch.optim.Optimizer):
        raise DistributedError(f"{where} returned a {type(optimizer).__name__} as the optimizer: return a "
                               "torch.optim.Optimizer or leave it out")
    return RankStep(model, tuple(args), dict(kwargs), loss, optimizer)


def _set_phase(counter: RankStorages | None, phase: str) -> None:
    if counter is not None:
        counter.phase = phase


def train_step(step: RankStep, counter: RankStorages | None = None) -> int:
    """Run one step: forward, backward, `optimizer.step()`, then every `.grad` set to None (`zero_grad()`).

    Returns the bytes of the local gradients backward left (before the optimizer
    ran). `counter`'s `phase` follows the step.
    """
    _set_phase(counter, "forward")
    out = step.model(*step.args, **step.kwargs)
    if step.loss is not None:
        out = step.loss(out)
    named, roots = step_outputs(out)
    tensors = [t for path, t in named if path in roots]
    loss = tensors[0] if len(tensors) == 1 and tensors[0].dim() == 0 else sum(t.sum() for t in tensors)
    del out, named, tensors  # as `loss = model(x).sum()` does: only the loss outlives the forward
    _set_phase(counter, "backward")
    loss.backward()  # type: ignore[union-attr]
    del loss
    params = rank_parameters(step.model)
    grads = local_storage_bytes(p.grad for p in params if p.grad is not None)
    _set_phase(counter, "optimizer")
    if step.optimizer is not None:
        step.optimizer.step()
        step.optimizer.zero_grad(set_to_none=True)
    for p in params:
        p.grad = None
    return grads


def check_meshes(model: torch.nn.Module, world_size: int) -> None:
    """Raise when a mesh the model's DTensors live on does not cover every rank of the world.

    torch accepts a mesh smaller than the world (the other ranks simply take no
    part), which for a training job means a mesh shape computed for another size.

    Raises:
        DistributedError: naming the mesh's shape and the world size.
    """
    names = {id(p): n for n, p in model.named_parameters()}
    for p in rank_parameters(model):
        # A DTensor's mesh, or for DDP with tensor parallelism the mesh of the DTensor its local parameter stands for
        spec = ddp_local_spec(p)
        mesh = p.device_mesh if is_dtensor(p) else spec.mesh if spec is not None else None  # type: ignore[attr-defined]
        if mesh is None:
            continue
        name = names.get(id(p), "(a local one DDP made)")
        root = root_mesh(mesh)  # a slice of a 2-D mesh covers part of the whole
        if root.size() != world_size:
            shape = tuple(root.shape)
            raise DistributedError(
                f"the mesh {shape} of parameter {name!r} covers {root.size()} of the {world_size} ranks: the mesh "
                f"must split the {world_size} ranks exactly (the product of its dimensions); compute its shape "
                "from dist.get_world_size()")


def _warmup_steps(model: torch.nn.Module, strategy: str) -> int:
    """Steps before the steady one: 1 (the optimizer's state, FSDP's lazy buffers); DDP rebuilds its buckets
    in its second step's forward, or its third with `static_graph=True` (measured on gloo ranks, torch 2.13)."""
    if strategy not in DDP_STRATEGIES:
        return 1
    return 3 if getattr(model, "static_graph", False) else 2


def ddp_buckets(model: torch.nn.Module) -> tuple[int, ...]:
    """The bytes of each of DDP's gradient buckets (`bucket_cap_mb` decides how many), () for other models."""
    if not isinstance(model, torch.nn.parallel.DistributedDataParallel):
        return ()
    sizes = ddp_bucket_sizes(model)
    return tuple(int(s) for s in re.findall(r"\d+", sizes))


def _state_tensors(optimizer: torch.optim.Optimizer | None) -> list[torch.Tensor]:
    if optimizer is None:
        return []
    return [v for state in optimizer.state.values() for v in state.values() if isinstance(v, torch.Tensor)]


def _inputs(step: RankStep) -> list[torch.Tensor]:
    found: list[torch.Tensor] = []
    stack: list[Any] = [step.args, dict(step.kwargs)]
    while stack:
        value = stack.pop()
        if isinstance(value, torch.Tensor):
            found.append(value)
        elif isinstance(value, Mapping):
            stack.extend(value.values())
        elif isinstance(value, (tuple, list)):
            stack.extend(value)
    return found


def run_rank_step(step: RankStep, *, rank: int, world_size: int, warmup: int | None = None,
                  with_torch_tracker: bool = False) -> RankMemory:
    """This rank's memory in the steady state: `warmup` steps (default 1; 2 for DDP, whose buckets are rebuilt
    after its first step, 3 with its `static_graph`), then one step counted by `RankStorages`.

    The warm-up makes what a step keeps (optimizer state, FSDP's lazily made
    buffers), so the counted step is the one every later step repeats. With
    `with_torch_tracker`, PyTorch's own tracker (`torch_tracker`) follows the
    same counted step, and its peak is kept in `tracker_bytes`.
    """
    check_meshes(step.model, world_size)
    strategy = strategy_of(step.model)
    for _ in range(warmup if warmup is not None else _warmup_steps(step.model, strategy)):
        train_step(step)
    counter = RankStorages()
    tracker_name, tracker_bytes = None, None
    if with_torch_tracker:
        from .torch_trackers import torch_tracker

        with torch_tracker(step.model, step.optimizer, _inputs(step)) as peak, counter:
            grads = train_step(step, counter)
        tracker_name, tracker_bytes = peak.name, peak.total_bytes
    else:
        with counter:
            grads = train_step(step, counter)
    model = step.model
    buckets = ddp_buckets(model)
    notes: list[str] = []
    if strategy == "replicated" and world_size > 1:
        notes.append(f"the model is not wrapped (no fully_shard, DDP or parallelize_module): each of the "
                     f"{world_size} ranks holds the whole model and runs the whole step, with no collective; "
                     "wrap it in FUNC as the training script does")
    if buckets:
        view = bool(getattr(model, "gradient_as_bucket_view", False))
        notes.append(f"DDP: {len(buckets)} gradient bucket(s) of {', '.join(str(b) for b in buckets)} bytes "
                     f"(bucket_cap_mb={model.bucket_bytes_cap / 2**20:g}); gradient_as_bucket_view={view}: "  # type: ignore[operator]
                     + ("each .grad is a view into its bucket" if view else "each .grad is a copy beside its bucket"))
    return RankMemory(
        rank=rank, world_size=world_size, strategy=strategy, peak_bytes=counter.peak,
        params_bytes=local_storage_bytes(rank_parameters(model)), grads_bytes=grads,
        optimizer_bytes=local_storage_bytes(_state_tensors(step.optimizer)),
        buffers_bytes=local_storage_bytes(model.buffers()), inputs_bytes=local_storage_bytes(_inputs(step)),
        buckets_bytes=sum(buckets), collectives=tuple(counter.events), notes=tuple(notes),
        tracker=tracker_name, tracker_bytes=tracker_bytes,
    )
