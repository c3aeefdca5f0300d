"""Forecast a rank's step for any number of GPUs in one process: a fake process group, fake tensors, no memory.

The user's FUNC runs as it runs in their training script (it reads the world
size and rank from `torch.distributed`, builds its meshes, wraps the model with
`fully_shard` or `parallelize_module`), inside torch's fake process group
(`init_process_group("fake", store=FakeStore())`: collectives return at once)
and `FakeTensorMode` (every tensor has a shape, a dtype and a device, and no
memory: the "meta" forecast). Its step is then counted by the same counter as a
real rank's (`run_rank_step`); torch's FSDPMemTracker works the same way.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.device_mesh as device_mesh

from ...analysis.distributed import RankMemory
from ...analysis.memory.fit import largest_batch
from ...errors import DistributedError
from ..memory.forecast import resized
from ..torch_internals import fake_store, fake_tensor_api
from .fake_ddp import ddp_on_fake_tensors, fake_mode
from .rank_step import rank_step, run_rank_step
from .spread import DDP_STRATEGIES

__all__ = ["fake_cluster", "forecast_world", "forecast_worlds", "largest_batch_world"]

_DDP_STEADY = ("DDP on the fake cluster: its own reducer ran on fake tensors, its default all-reduce as a "
               "communication hook; the forecast is of the steady step, after DDP rebuilt its buckets in "
               "gradient-ready order (in its second step's forward, the third's with static_graph, never with "
               "find_unused_parameters), which frees the old buckets before making the new ones: on real gloo ranks "
               "no earlier step reached more in our tests")
_MESH_INIT = device_mesh.DeviceMesh.__init__
FakeTensor, _, unset_fake_temporarily, _ = fake_tensor_api()


def _mesh_init(self: Any, *args: Any, **kwargs: Any) -> None:
    """`DeviceMesh.__init__` with its rank map as a real tensor.

    `init_device_mesh` makes the mesh's rank map with `torch.arange`, which
    FakeTensorMode turns into a fake tensor whose values the mesh then cannot
    read; the map is always the identity there, so it is made again, for real.
    """
    rank_map = kwargs.get("_rank_map")
    with unset_fake_temporarily():
        if isinstance(rank_map, FakeTensor):
            kwargs["_rank_map"] = torch.arange(rank_map.numel(), dtype=rank_map.dtype).reshape(rank_map.shape)
        _MESH_INIT(self, *args, **kwargs)


@contextlib.contextmanager
def fake_cluster(world_size: int, rank: int = 0) -> Iterator[Any]:
    """Inside the block, this process is `rank` of a fake process group of `world_size`, under FakeTensorMode.

    Raises:
        DistributedError: a process group is already initialised here, or the sizes make no sense.
    """
    if not isinstance(world_size, int) or world_size < 1:
        raise DistributedError(f"a world size is a positive whole number of ranks, got {world_size!r}")
    if not 0 <= rank < world_size:
        raise DistributedError(f"rank {rank} is not one of the {world_size} ranks (0 to {world_size - 1})")
    if dist.is_initialized():
        raise DistributedError("a process group is already initialised in this process: forecast on a fake cluster "
                               "from a plain process (not inside torchrun), or call destroy_process_group() first")
    dist.init_process_group("fake", store=fake_store(), rank=rank, world_size=world_size)
    device_mesh.DeviceMesh.__init__ = _mesh_init  # type: ignore[method-assign]
    try:
        with ddp_on_fake_tensors(), fake_mode() as mode:
            yield mode
    finally:
        device_mesh.DeviceMesh.__init__ = _MESH_INIT  # type: ignore[method-assign]
        dist.destroy_process_group()


def forecast_world(func: Callable[[], Any], *, world_size: int, rank: int = 0, where: str = "FUNC",
                   warmup: int | None = None, batch: int | None = None,
                   with_torch_tracker: bool = False) -> RankMemory:
    """`rank`'s step of `func`'s job on `world_size` GPUs, forecast on a fake cluster (nothing allocated).

    `func` takes no arguments, builds and wraps the model as the training script
    does (reading `dist.get_world_size()` and `dist.get_rank()`), and returns it
    with its inputs (and optimizer) in a form `rank_step` takes. `batch` sets the
    first dimension of every input tensor (the batch per GPU). With `with_torch_tracker`, PyTorch's
    tracker (FSDPMemTracker, MemTracker) follows the same fake step (`tracker_bytes`).

    Raises:
        DistributedError: `func` failed (its message, with the world size), or returned no step.
    """
    with fake_cluster(world_size, rank):
        try:
            result = func()
        except DistributedError as e:  # raised by what FUNC called (the fake cluster's DDP): say where and at what size
            raise DistributedError(f"{where} failed at world size {world_size}: {e}") from e
        except Exception as e:  # noqa: BLE001 - the user's FUNC: say where and at which size, keep the cause
            raise DistributedError(_func_failed(where, world_size, e)) from e
        step = rank_step(result, where)
        if batch is not None:
            step = dataclasses.replace(step, args=resized(step.args, batch=batch),
                                       kwargs=resized(dict(step.kwargs), batch=batch))
        try:
            memory = run_rank_step(step, rank=rank, world_size=world_size, warmup=warmup,
                                   with_torch_tracker=with_torch_tracker)
        except DistributedError:
            raise
        except Exception as e:  # noqa: BLE001 - the user's model: say where and at which size
            raise DistributedError(f"the step of {where} failed at world size {world_size}: "
                                   f"{type(e).__name__}: {_first_line(e)}{_values_hint(e)}") from e
    if memory.strategy in DDP_STRATEGIES and warmup is None:
        memory = dataclasses.replace(memory, notes=(*memory.notes, _DDP_STEADY))
    return memory


def forecast_worlds(func: Callable[[], Any], world_sizes: Sequence[int], *, rank: int = 0, where: str = "FUNC",
                    warmup: int | None = None, batch: int | None = None) -> tuple[RankMemory, ...]:
    """`forecast_world` at each of `world_sizes`, in order."""
    return tuple(forecast_world(func, world_size=n, rank=rank, where=where, warmup=warmup, batch=batch)
                 for n in world_sizes)


def largest_batch_world(func: Callable[[], Any], *, world_size: int, budget_bytes: int, rank: int = 0,
                        where: str = "FUNC") -> int:
    """The largest batch per GPU whose forecast total (`RankMemory.total_bytes`) fits `budget_bytes` on each
    rank at `world_size` (0: not even 1); a handful of forecasts (`largest_batch`'s search)."""
    def total(batch: int) -> int:
        return forecast_world(func, world_size=world_size, rank=rank, where=where, batch=batch).total_bytes

    return largest_batch(total, budget_bytes)


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _func_failed(where: str, world_size: int, e: Exception) -> str:
    text = _first_line(e)
    if "comm_hook" in text and "only be called once" in text:  # FUNC's own hook after the fake cluster's
        return (f"{where} failed at world size {world_size}: a DDP communication hook registered in {where} cannot "
                "run on the fake cluster (its process group hands no tensor back; DDP's default all-reduce runs "
                "there instead); forecast without the hook, or measure it on real ranks: run_ranks")
    hint = _values_hint(e)
    if "mesh" in text.lower() or "world size" in text.lower() or "world_size" in text:
        hint += f"; the mesh must split the {world_size} ranks exactly (the product of its dimensions)"
    return f"{where} failed at world size {world_size}: {type(e).__name__}: {text}{hint}"


def _values_hint(e: BaseException) -> str:
    text = _first_line(e)
    if "data is not allocated" not in text and "_local_scalar_dense" not in text:
        return ""
    return ("; something read a tensor's values (.item(), .tolist(), a C++ extension), which fake tensors do not "
            "have: measure on real ranks instead: run_ranks, or measure_rank under torchrun")
