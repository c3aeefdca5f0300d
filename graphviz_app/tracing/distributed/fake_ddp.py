"""DDP on the fake cluster: torch's own DistributedDataParallel and C++ reducer, on fake tensors.

The reducer itself runs (its bucket assignment by `bucket_cap_mb`, the single
first-step bucket and the rebuild in gradient-ready order, `.grad` as a bucket
view or a copy beside it, `find_unused_parameters`, `static_graph`; DDP over the "dp"
slice of a 2-D mesh, with tensor parallelism on the other), so a fake rank
allocates what a real one does. The places that read a tensor's values,
which fake tensors do not have, are answered as one process of the fake cluster
can:

- the check at construction that every rank's parameters have the same shapes
  is skipped (one process runs one FUNC: there is nothing to compare);
- the reducer's small int32 tensors (the rebuilt bucket assignment it broadcasts
  from rank 0, the map of parameters used in the step with
  `find_unused_parameters` or `static_graph`), which it writes and reads, are
  real tensors: made so inside DDP's constructor and pre-forward, and every op
  whose tensors are all real int32 ones runs for real (`fake_mode`);
- the all-reduce of each bucket goes through a communication hook that does what
  DDP's default does (divide by the world size, all-reduce in place) and hands the
  bucket back itself: the fake process group's futures hold no tensor.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from ..memory.counting import tensors_in
from ..torch_internals import TorchDispatchMode, fake_tensor_api
from ..torch_internals.ddp import ddp_steps_around

__all__ = ["ddp_on_fake_tensors", "fake_allreduce_hook", "fake_mode"]

FakeTensor, FakeTensorMode, unset_fake_temporarily, _ = fake_tensor_api()
_DDP_INIT = DistributedDataParallel.__init__


def _all_real_int32(tensors: list[torch.Tensor]) -> bool:
    return bool(tensors) and all(t.dtype == torch.int32 and not isinstance(t, FakeTensor) for t in tensors)


class _RealInt32Made(TorchDispatchMode):
    """Int32 tensors made from nothing (empty, zeros) are real: inside DDP's constructor and pre-forward, these
    are the reducer's bucket assignment and map of used parameters (a few bytes per parameter)."""

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if not tensors_in((args, kwargs)) and kwargs.get("dtype") == torch.int32:
            with unset_fake_temporarily():
                return func(*args, **kwargs)
        return func(*args, **kwargs)


class _FakeModeForDdp(FakeTensorMode):  # type: ignore[misc, valid-type]
    """FakeTensorMode in which an op whose tensors are all real int32 ones runs for real (the reducer's own,
    made real by `_RealInt32Made`: it fills, all-reduces and reads them back); any other op is faked.

    A mode, not a patch around a call: the reducer works on these in backward, on
    whatever thread the fake mode is entered (a traced step runs on a thread of its own).
    """

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if _all_real_int32(tensors_in((args, kwargs or {}))):
            with unset_fake_temporarily():
                return func(*args, **(kwargs or {}))
        return super().__torch_dispatch__(func, types, args, kwargs)


def fake_mode() -> Any:
    """The fake cluster's FakeTensorMode (constants from outside allowed), with DDP's real int32 tensors real."""
    return _FakeModeForDdp(allow_non_fake_inputs=True)


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


def _init(self: DistributedDataParallel, *args: Any, **kwargs: Any) -> None:
    with _RealInt32Made():
        _DDP_INIT(self, *args, **kwargs)
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
        with ddp_steps_around(shape_check=_skip_shape_check, around_pre_forward=_RealInt32Made):
            yield
    finally:
        DistributedDataParallel.__init__ = _DDP_INIT  # type: ignore[method-assign]
