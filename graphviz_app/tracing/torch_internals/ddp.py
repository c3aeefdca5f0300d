"""DDP's private parts that a fake-cluster forecast steps around: the shape check across ranks, the pre-forward."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch.nn.parallel.distributed as ddp_module

__all__ = ["ddp_steps_around"]


@contextlib.contextmanager
def ddp_steps_around(*, shape_check: Callable[..., None],
                     around_pre_forward: Callable[[], contextlib.AbstractContextManager[Any]]) -> Iterator[None]:
    """Inside the block, DDP's construction-time check that every rank holds parameters of the same shapes
    (`_verify_param_shape_across_processes`, which all-gathers the shapes and reads them back) is `shape_check`,
    and `DistributedDataParallel._pre_forward` (where the reducer rebuilds its buckets, broadcasting the new
    assignment as an int32 tensor whose values it reads) runs inside `around_pre_forward()`.

    Both are module-level names of `torch.nn.parallel.distributed` that DDP looks up when called; they are put
    back when the block ends.
    """
    ddp = ddp_module.DistributedDataParallel
    check, pre_forward = ddp_module._verify_param_shape_across_processes, ddp._pre_forward

    def wrapped(self: Any, *args: Any, **kwargs: Any) -> Any:
        with around_pre_forward():
            return pre_forward(self, *args, **kwargs)

    ddp_module._verify_param_shape_across_processes = shape_check
    ddp._pre_forward = wrapped  # type: ignore[method-assign]
    try:
        yield
    finally:
        ddp_module._verify_param_shape_across_processes = check
        ddp._pre_forward = pre_forward  # type: ignore[method-assign]
