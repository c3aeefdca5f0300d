"""DDP's private parts: the ones a fake-cluster forecast steps around (the shape check across ranks, the
pre-forward), and the parameters DDP reduces."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch.nn.parallel.distributed as ddp_module

__all__ = ["ddp_steps_around", "ddp_parameters", "ddp_local_spec", "ddp_dtensor_attributes"]


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


def ddp_parameters(ddp: Any) -> list[Any]:
    """The parameters `ddp` (a DistributedDataParallel) reduces, as the reducer holds them (`_module_parameters`).

    Over a slice of a 2-D mesh (DDP with tensor parallelism), DDP turns each
    DTensor parameter into a parameter of its local shard; the module's forward
    pre-hook then sets DTensors made from them as plain attributes, so from the
    first forward on `ddp.parameters()` no longer yields them: only this list does.
    """
    return list(getattr(ddp, "_module_parameters", ()))


def ddp_local_spec(param: Any) -> Any:
    """The spec (`mesh`, `placements`, global `shape`) of the DTensor a parameter of DDP with tensor parallelism
    stands for (DDP keeps it as `_st_info` on the local parameter it made), or None for any other tensor."""
    return getattr(param, "_st_info", None)


def ddp_dtensor_attributes(ddp: Any, dtensor_type: Any) -> list[tuple[str, Any]]:
    """(qualified name, the local parameter it is made from) for each DTensor that DDP with tensor parallelism's
    forward pre-hook (`_reconstruct_dtensor`) set as a plain attribute of a module of `ddp`.

    The hook makes each with `DTensor.from_local`, whose local tensor is a view
    of DDP's local parameter (`_local_tensor._base`), the one its reducer holds.
    A tensor set under several names is listed under each.
    """
    found = []
    for module_name, module in ddp.named_modules():
        for attr, value in vars(module).items():
            if isinstance(value, dtensor_type):
                base = value._local_tensor._base
                if base is not None:
                    found.append((f"{module_name}.{attr}" if module_name else attr, base))
    return found
