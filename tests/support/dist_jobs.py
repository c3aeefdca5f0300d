"""Small training jobs as a training script writes them: each `build(mesh)` wraps a model for its mesh.

`job(name)` is the FUNC a person would pass: it reads the world size from
torch.distributed, makes the mesh, and builds. The oracles build on a mesh they
make themselves (outside FakeTensorMode, as torch's own tests do).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
from torch.utils.checkpoint import checkpoint

D = 64
BATCH, SEQ = 4, 16


class Block(torch.nn.Module):
    """A residual MLP block, the unit FSDP shards and TP splits."""

    def __init__(self, d: int = D) -> None:
        super().__init__()
        self.up = torch.nn.Linear(d, 4 * d)
        self.down = torch.nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.relu(self.up(x)))


def plain_model(layers: int = 3) -> torch.nn.Sequential:
    torch.manual_seed(0)
    return torch.nn.Sequential(*[Block() for _ in range(layers)])


def _step(model: torch.nn.Module) -> tuple[torch.nn.Module, torch.Tensor, torch.optim.Optimizer]:
    return model, torch.randn(BATCH, SEQ, D), torch.optim.Adam(model.parameters(), lr=1e-3)


def build_fsdp(mesh: DeviceMesh, *, reshard: bool = True, mixed: bool = False) -> Any:
    model = plain_model()
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if mixed \
        else MixedPrecisionPolicy()
    for block in model:
        fully_shard(block, mesh=mesh, reshard_after_forward=reshard, mp_policy=policy)
    fully_shard(model, mesh=mesh, reshard_after_forward=reshard, mp_policy=policy)
    return _step(model)


def _tp_plan(model: torch.nn.Sequential, mesh: DeviceMesh) -> None:
    for block in model:
        parallelize_module(block, mesh, {"up": ColwiseParallel(), "down": RowwiseParallel()})


def build_tp(mesh: DeviceMesh) -> Any:
    model = plain_model()
    _tp_plan(model, mesh)
    return _step(model)


def build_fsdp_tp(mesh: DeviceMesh) -> Any:
    model = plain_model()
    _tp_plan(model, mesh["tp"])
    for block in model:
        fully_shard(block, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return _step(model)


# A module name a user's code could hold (no dot: torch refuses those): the viewer shows it as text, runs nothing.
HOSTILE_BLOCK = "<img src=x onerror=\"window['__pwned']=3;alert('block')\">"


def build_fsdp_hostile(mesh: DeviceMesh) -> Any:
    """FSDP2 as `build_fsdp`, the middle block named `HOSTILE_BLOCK`."""
    blocks = list(plain_model())
    model = torch.nn.Sequential(OrderedDict([("0", blocks[0]), (HOSTILE_BLOCK, blocks[1]), ("2", blocks[2])]))
    for block in model:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return _step(model)


def build_ddp(mesh: DeviceMesh | None, *, view: bool = False, **options: Any) -> Any:
    model = torch.nn.parallel.DistributedDataParallel(plain_model(), bucket_cap_mb=0.1, gradient_as_bucket_view=view,
                                                      **options)
    return _step(model)


class CheckpointedBlock(torch.nn.Module):
    """A residual MLP block run under `checkpoint(..., use_reentrant=True)`, scaling its input by a parameter
    its model also uses outside every block (one `.grad` made by the outer backward and each nested one)."""

    def __init__(self, scale: torch.nn.Parameter, d: int = 16) -> None:
        super().__init__()
        self.up = torch.nn.Linear(d, 4 * d)
        self.down = torch.nn.Linear(4 * d, d)
        self._scale = [scale]  # a list: the parameter stays the model's own, not registered twice

    def _inner(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.relu(self.up(x * self._scale[0])))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return checkpoint(self._inner, x, use_reentrant=True)


class ReentrantModel(torch.nn.Module):
    """Three `CheckpointedBlock`s after `x * scale`: `scale` is used outside the blocks and inside each."""

    def __init__(self, d: int = 16) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.scale = torch.nn.Parameter(torch.ones(d))
        self.blocks = torch.nn.ModuleList([CheckpointedBlock(self.scale, d) for _ in range(3)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x * self.scale
        for block in self.blocks:
            h = block(h)
        return h


def build_reentrant(mesh: DeviceMesh | None, batch: int = 1) -> Any:
    """`ReentrantModel` under DDP (mesh None; `static_graph=True`, torch's way for a parameter used in several
    reentrant backwards) or FSDP2 (each block a unit), with an input of `batch` rows."""
    model: torch.nn.Module = ReentrantModel()
    if mesh is None:
        model = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.1, static_graph=True)
    else:
        for block in model.blocks:  # type: ignore[union-attr]
            fully_shard(block, mesh=mesh)
        fully_shard(model, mesh=mesh)
    return model, torch.randn(batch, 8, 16), torch.optim.Adam(model.parameters(), lr=1e-3)


def ddp_reentrant() -> Any:
    return build_reentrant(None)


def fsdp_reentrant() -> Any:
    return build_reentrant(init_device_mesh("cpu", (dist.get_world_size(),)))


class CheckpointedUnits(torch.nn.Module):
    """`x * scale`, then three MLP blocks each called as `checkpoint(block, h, use_reentrant=True)` from
    the model's forward: under FSDP2 each block is a unit whose forward (its hooks included) runs again, with its
    whole backward, inside its checkpoint's node."""

    def __init__(self, d: int = 16) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.scale = torch.nn.Parameter(torch.ones(d))
        self.blocks = torch.nn.ModuleList([torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.ReLU(),
                                                               torch.nn.Linear(4 * d, d)) for _ in range(3)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x * self.scale
        for block in self.blocks:
            h = checkpoint(block, h, use_reentrant=True)
        return h


def build_checkpointed_units(mesh: DeviceMesh, batch: int = 1) -> Any:
    """`CheckpointedUnits` under FSDP2 (each block a unit, and the root), with an input of `batch` rows."""
    model = CheckpointedUnits()
    for block in model.blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model, torch.randn(batch, 8, 16), torch.optim.Adam(model.parameters(), lr=1e-3)


def fsdp_checkpointed_units() -> Any:
    return build_checkpointed_units(init_device_mesh("cpu", (dist.get_world_size(),)))


def build_ddp_tp(mesh: DeviceMesh) -> Any:
    """TP on the mesh's "tp" dimension, then DDP over its "dp" slice (torch's way: DDP given `process_group=`
    broadcasts the DTensor parameters, which DTensor refuses)."""
    model = plain_model()
    _tp_plan(model, mesh["tp"])
    return _step(torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.1, device_mesh=mesh["dp"]))


def mesh_for(name: str, world_size: int) -> DeviceMesh:
    if name.startswith("ddp_tp"):  # dp x tp: "ddp_tp" splits the ranks by TP, "ddp_tp_dp" by DDP
        tp = 1 if name.startswith("ddp_tp_dp") else world_size
        return init_device_mesh("cpu", (world_size // tp, tp), mesh_dim_names=("dp", "tp"))
    if name == "fsdp_tp":
        tp = 2 if world_size % 2 == 0 and world_size > 2 else 1
        return init_device_mesh("cpu", (world_size // tp, tp), mesh_dim_names=("dp", "tp"))
    return init_device_mesh("cpu", (world_size,))


BUILDERS: dict[str, Callable[[DeviceMesh], Any]] = {
    "fsdp": build_fsdp,
    "fsdp_keep": lambda mesh: build_fsdp(mesh, reshard=False),
    "fsdp_mixed": lambda mesh: build_fsdp(mesh, mixed=True),
    "fsdp_keep_mixed": lambda mesh: build_fsdp(mesh, reshard=False, mixed=True),
    "tp": build_tp,
    "fsdp_tp": build_fsdp_tp,
    "ddp": build_ddp,
    "ddp_view": lambda mesh: build_ddp(mesh, view=True),
    "fsdp_hostile": build_fsdp_hostile,
    "ddp_tp": build_ddp_tp,
    "ddp_tp_dp": build_ddp_tp,
}


def job(name: str) -> Callable[[], Any]:
    """The FUNC of a job: world size from torch.distributed, the mesh, the wrapped model, inputs, optimizer."""
    def func() -> Any:
        world = dist.get_world_size()
        return BUILDERS[name](None if name in ("ddp", "ddp_view") else mesh_for(name, world))

    func.__name__ = name
    return func


# The FUNCs as a script names them (SCRIPT.py:FUNC), for ranks started in processes of their own.
def fsdp() -> Any:
    return job("fsdp")()


def fsdp_keep() -> Any:
    return job("fsdp_keep")()


def fsdp_mixed() -> Any:
    return job("fsdp_mixed")()


def fsdp_keep_mixed() -> Any:
    return job("fsdp_keep_mixed")()


def tp() -> Any:
    return job("tp")()


def fsdp_tp() -> Any:
    return job("fsdp_tp")()


def ddp() -> Any:
    return job("ddp")()


def ddp_view() -> Any:
    return job("ddp_view")()


def ddp_tp() -> Any:
    return job("ddp_tp")()


def ddp_tp_dp() -> Any:
    return job("ddp_tp_dp")()


def ddp_unused() -> Any:
    """DDP looking for unused parameters in every step (it reads which were used from a tensor's values)."""
    return build_ddp(None, find_unused_parameters=True)


def ddp_static() -> Any:
    """DDP told its graph is static: it finds the unused parameters in its first step, rebuilds in its third."""
    return build_ddp(None, static_graph=True)


def ddp_hooked() -> Any:
    """DDP with a communication hook of its own (torch's plain all-reduce, written in Python)."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    model, x, optimizer = build_ddp(None)
    model.register_comm_hook(None, default_hooks.allreduce_hook)
    return model, x, optimizer


def fsdp_hostile() -> Any:
    return job("fsdp_hostile")()


def raises_on_rank_1() -> Any:
    """Rank 1 raises while building; rank 0 goes on into the first collective and would wait there for ever."""
    if dist.get_rank() == 1:
        raise ValueError("rank 1 cannot build its model")
    return job("fsdp")()


def no_process_group_needed() -> Any:
    """A FUNC that wraps nothing: a plain model, replicated (no collective at all)."""
    return plain_model(1), torch.randn(BATCH, SEQ, D)


def measure_beside_tracker(result: Any, target: str, with_torch_tracker: bool) -> dict[str, int]:
    """On a rank: `graphviz_app.memory.measure` of the step's forward and backward, then PyTorch's tracker on the
    same forward and backward (the output held during backward, as `measure` holds it), after the warm-up
    (one step; two for DDP, three with its static_graph).

    Returns the bytes: measure's peak plus what the rank holds anyway (local parameter shards, buffers,
    inputs, DDP's buckets), the tracker's peak, and the replay's peak plus the same.
    """
    from graphviz_app.memory import measure
    from graphviz_app.tracing.distributed.rank_step import ddp_buckets
    from graphviz_app.tracing.distributed.shards import local_storage_bytes, rank_parameters
    from graphviz_app.tracing.distributed.torch_trackers import torch_tracker

    model, x = result[0], result[1]

    def step() -> None:
        out = model(x)
        out.sum().backward()
        del out
        for p in rank_parameters(model):
            p.grad = None

    ddp = isinstance(model, torch.nn.parallel.DistributedDataParallel)
    for _ in range((3 if getattr(model, "static_graph", False) else 2) if ddp else 1):
        step()  # DDP rebuilds its buckets in its second step (third with static_graph): the steady state comes after
    held = local_storage_bytes([*rank_parameters(model), *model.buffers(), x]) + sum(ddp_buckets(model))
    m = measure(model, x)
    with torch_tracker(model, None, [x]) as peak:
        step()
    assert peak.total_bytes is not None
    return {"measured": m.measured.peak_bytes + held, "tracker": peak.total_bytes,
            "replayed": m.predicted.peak_bytes + held}


def least_beside_tracker(result: Any, target: str, with_torch_tracker: bool) -> dict[str, int]:
    """`measure_beside_tracker` three times on one rank, and the least of each figure: on real gloo ranks a
    collective's buffers are freed by gloo's own thread once its work is done, now and then after the next step has
    begun, which then counts them too (seen: +676 B in the tracker's figure, +3,744 B in measure's, one run in four
    on a busy machine). Late frees only add, so the least of three is the step without them."""
    runs = [measure_beside_tracker(result, target, with_torch_tracker) for _ in range(3)]
    return {key: min(run[key] for run in runs) for key in runs[0]}


def saved_rank_viewer(result: Any, target: str, with_torch_tracker: bool) -> dict[str, Any]:
    """On a rank: `measure` of the step after a warm-up one, then `save(graph, "rank{rank}.html")` and
    `save(graph, "rank{rank}.json")`, as a training script would, and `trace_model`'s graph saved the same way;
    the files' text and the collectives each graph carries."""
    import tempfile
    from pathlib import Path

    from graphviz_app import save, trace_model
    from graphviz_app.memory import measure

    model, x = result[0], result[1]
    model(x).sum().backward()  # the warm-up: FSDP2's lazy init
    for p in model.parameters():
        p.grad = None
    graph = measure(model, x).graph
    traced = trace_model(model, x)
    rank = dist.get_rank()
    with tempfile.TemporaryDirectory() as folder:
        files = [save(graph, Path(folder) / f"rank{rank}.html"), save(graph, Path(folder) / f"rank{rank}.json"),
                 save(traced, Path(folder) / f"traced{rank}.html")]
        texts = [f.read_text(encoding="utf-8") for f in files]
    assert graph.rank is not None and traced.rank is not None
    return {"rank": rank, "html": texts[0], "json": texts[1], "traced_html": texts[2],
            "collectives": [(c.op, c.bytes, c.phase, c.node) for c in graph.rank.collectives],
            "traced_collectives": [(c.op, c.bytes, c.phase, c.node) for c in traced.rank.collectives]}
