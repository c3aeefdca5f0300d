"""DDP on the fake cluster: torch's own DistributedDataParallel and C++ reducer, on fake tensors.

The reducer itself runs (its bucket assignment by `bucket_cap_mb`, the single
first-step bucket and the rebuild in gradient-ready order, `.grad` as a bucket
view or a copy beside it), so a fake rank allocates what a real one does. Three
places read a tensor's values, which fake tensors do not have; inside
`ddp_on_fake_tensors` each is answered as one process of the fake cluster can:

- the check at construction that every rank's parameters have the same shapes
  is skipped (one process runs one FUNC: there is nothing to compare);
- the rebuilt bucket assignment, which the reducer broadcasts from rank 0 as an
  int32 tensor it writes and reads, is made of real (tiny) tensors;
- the all-reduce of each bucket goes through a communication hook that does what
  DDP's default does (divide by the world size, all-reduce in place) and hands the
  bucket back itself: the fake process group's futures hold no tensor.

`find_unused_parameters=True` and `static_graph=True` read which parameters were
used from a tensor's values in every step; they are refused with the reason.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from ...errors import DistributedError
from ..memory.counting import tensors_in
from ..torch_internals import TorchDispatchMode, fake_tensor_api
from ..torch_internals.ddp import ddp_steps_around

__all__ = ["ddp_on_fake_tensors", "fake_allreduce_hook"]

FakeTensor, _, unset_fake_temporarily, _ = fake_tensor_api()
_DDP_INIT = DistributedDataParallel.__init__
_EMPTY = torch.ops.aten.empty.memory_format
_ON_REAL_RANKS = "measure DDP with it on real ranks: run_ranks, or measure_rank under torchrun"


class _RealBucketIndices(TorchDispatchMode):
    """Int32 tensors made from nothing, and ops whose tensors are all real int32 ones, run for real.

    These are the bucket indices and sizes the reducer writes, broadcasts and
    reads back when it rebuilds its buckets (a few bytes per parameter); every
    other op (the new buckets themselves included) goes on to FakeTensorMode.
    """

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        tensors = tensors_in((args, kwargs))
        if tensors:
            real = all(t.dtype == torch.int32 and not isinstance(t, FakeTensor) for t in tensors)
        else:
            real = func is _EMPTY and kwargs.get("dtype") == torch.int32
        if not real:
            return func(*args, **kwargs)
        with unset_fake_temporarily():
            return func(*args, **kwargs)


def fake_allreduce_hook(process_group: Any, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """DDP's default reduction of a bucket as a communication hook: divided by the world size, all-reduced in
    place, and handed back in a finished future (the fake process group's own futures hold no tensor)."""
    buffer = bucket.buffer()
    buffer.div_(dist.get_world_size(process_group))
    dist.all_reduce(buffer, group=process_group)
    done: torch.futures.Future[torch.Tensor] = torch.futures.Future()
    done.set_result(buffer)
    return done


# DDP checks a hook's annotations against the objects themselves; this module's are strings (postponed).
fake_allreduce_hook.__annotations__ = {"process_group": Any, "bucket": dist.GradBucket,
                                       "return": torch.futures.Future[torch.Tensor]}


def _refuse_what_reads_values(model: DistributedDataParallel) -> None:
    for flag in ("find_unused_parameters", "static_graph"):
        if getattr(model, flag, False):
            raise DistributedError(
                f"DDP with {flag}=True cannot be forecast on the fake cluster: its reducer reads which parameters "
                f"each step used from a tensor's values, and fake tensors have none; forecast with {flag}=False "
                f"(when every parameter gets a gradient each step, its buckets hold the same bytes), or "
                f"{_ON_REAL_RANKS}")


def _init(self: DistributedDataParallel, *args: Any, **kwargs: Any) -> None:
    _DDP_INIT(self, *args, **kwargs)
    _refuse_what_reads_values(self)
    self.register_comm_hook(self.process_group, fake_allreduce_hook)


def _skip_shape_check(*args: Any, **kwargs: Any) -> None:
    """One process stands for every rank of the fake cluster: every rank has the same parameters."""


@contextlib.contextmanager
def ddp_on_fake_tensors() -> Iterator[None]:
    """Inside the block (a fake cluster's), DistributedDataParallel runs on fake tensors as the module says.

    A FUNC that registers a communication hook of its own gets torch's error
    that a DDP model takes one hook (the fake cluster's is registered first);
    `fake_cluster` says so in words.
    """
    DistributedDataParallel.__init__ = _init  # type: ignore[method-assign]
    try:
        with ddp_steps_around(shape_check=_skip_shape_check, around_pre_forward=_RealBucketIndices):
            yield
    finally:
        DistributedDataParallel.__init__ = _DDP_INIT  # type: ignore[method-assign]
