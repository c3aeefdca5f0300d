"""Fused kernels, fake tensors, and the private parts of a distributed step (DDP, meshes, FSDP2, trackers)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["fused_attention_ops", "fake_tensor_api", "fake_store", "wait_tensor_op", "ddp_bucket_sizes", "root_mesh",
           "memory_trackers", "fake_mode_and_converter", "grouped_mm_op", "fsdp_unsharded_params",
           "dtensor_shape_propagator", "fsdp_units", "mkldnn_bf16_supported"]

def fused_attention_ops() -> tuple[Any, Any, Any]:
    """The fused attention kernels `F.scaled_dot_product_attention` dispatches to on CPU and CUDA: CPU's
    flash attention, CUDA's flash attention and CUDA's memory-efficient attention (a forecast on meta,
    where torch takes the math path, calls them itself)."""
    return (torch.ops.aten._scaled_dot_product_flash_attention_for_cpu,
            torch.ops.aten._scaled_dot_product_flash_attention,
            torch.ops.aten._scaled_dot_product_efficient_attention)


def mkldnn_bf16_supported() -> bool:
    """Whether this CPU has oneDNN's bfloat16 kernels (torch's `mkldnn_bf16_device_check`), which torch's LSTM
    needs to run its fused layer kernel in bfloat16."""
    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def fake_tensor_api() -> tuple[Any, Any, Any, Callable[[], Any]]:
    """FakeTensor, FakeTensorMode, `unset_fake_temporarily` (a block where fake mode is off) and
    `active_fake_mode()` (the fake mode in force, or None): the tensors a fake-cluster forecast runs on."""
    from torch._guards import active_fake_mode
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode, unset_fake_temporarily

    return FakeTensor, FakeTensorMode, unset_fake_temporarily, active_fake_mode


def fake_store() -> Any:
    """The store of torch's fake process group (`init_process_group("fake", store=fake_store())`)."""
    from torch.testing._internal.distributed.fake_pg import FakeStore

    return FakeStore()


def wait_tensor_op() -> Any:
    """`torch.ops._c10d_functional.wait_tensor.default`: a functional collective's wait."""
    return torch.ops._c10d_functional.wait_tensor.default


def ddp_bucket_sizes(ddp: Any) -> str:
    """DDP's gradient bucket sizes in bytes, as its logging data writes them ("1024, 2048"): the rebuilt ones
    once its second step has rebuilt them in gradient-ready order, else the first step's (DDP has no public
    API for its buckets)."""
    data = ddp._get_ddp_logging_data()
    return str(data.get("rebuilt_bucket_sizes") or data.get("bucket_sizes", ""))


def root_mesh(mesh: Any) -> Any:
    """The whole mesh a DeviceMesh slice (`mesh["tp"]`) was cut from; the mesh itself when it is whole."""
    get = getattr(mesh, "_get_root_mesh", None)
    return get() if get is not None else mesh


def memory_trackers() -> tuple[Any, Any]:
    """PyTorch's FSDPMemTracker and MemTracker (`torch.distributed._tools`): what a rank is checked against."""
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
    from torch.distributed._tools.mem_tracker import MemTracker

    return FSDPMemTracker, MemTracker


def fake_mode_and_converter() -> tuple[Any, Callable[[Any, torch.Tensor, torch.device], torch.Tensor]]:
    """A new `FakeTensorMode` (constants from outside allowed) and its converter from a meta tensor to a fake
    tensor of a device (`torch._subclasses.fake_tensor`, private: read here only)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode(allow_non_fake_inputs=True)
    return mode, mode.fake_tensor_converter.from_meta_and_device


def grouped_mm_op() -> Any:
    """The grouped matmul op of mixture-of-experts layers (`aten::_grouped_mm`, private), or None in a torch
    without it."""
    packet = getattr(torch.ops.aten, "_grouped_mm", None)
    return getattr(packet, "default", None) if packet is not None else None


def fsdp_unsharded_params() -> dict[int, tuple[Any, Any, str | None]]:
    """FSDP2's unsharded parameters alive now: id(unsharded) -> (unsharded, sharded DTensor, its name).

    FSDP2 swaps each module's sharded parameter for an unsharded one, all-gathered,
    while the module runs: the autograd graph's leaves are those, known to FSDP's
    per-parameter state only (`FSDPParam._unsharded_param`, `._param_fqn`), reached
    through the composable API's module-to-state table.
    """
    import sys
    import weakref

    state_module = sys.modules.get("torch.distributed._composable_state")
    if state_module is None or "torch.distributed.fsdp" not in sys.modules:
        return {}
    found: dict[int, tuple[Any, Any, str | None]] = {}
    for held in list(state_module._module_state_mapping.values()):
        state = held() if isinstance(held, weakref.ref) else held  # torch keeps each state by weak reference
        group = getattr(state, "_fsdp_param_group", None)
        for fsdp_param in getattr(group, "fsdp_params", ()) or ():
            unsharded = getattr(fsdp_param, "_unsharded_param", None)
            if unsharded is not None:
                found[id(unsharded)] = (unsharded, fsdp_param.sharded_param, getattr(fsdp_param, "_param_fqn", None))
    return found



def dtensor_shape_propagator() -> type:
    """DTensor's `ShardingPropagator`, whose `_propagate_tensor_meta_non_cached` runs each op once on global-shape
    fake tensors to learn its output's metadata (its cache of that is per thread), under the fake mode in force."""
    from torch.distributed.tensor._sharding_prop import ShardingPropagator

    return ShardingPropagator


def fsdp_units(
        model: torch.nn.Module) -> list[tuple[str, tuple[str, ...], tuple[int, ...], int, int, int, int, bool]]:
    """FSDP2's units of `model`, from each unit's parameter group: (module name, its parameters' names, each
    one's unsharded bytes, the unsharded parameters' bytes, the all-gather output's bytes, the local gradient
    shards' bytes, the reduce-scatter input's bytes, whether it reshards after forward).
    Empty for a model without FSDP2.

    The sizes live in FSDP's per-parameter state only (`FSDPParam.padded_sharded_param_size`, `param_dtype`,
    `reduce_dtype`, `_orig_size`) and the group's `post_forward_mesh_info` (None: kept after forward).
    """
    import sys

    fsdp = sys.modules.get("torch.distributed.fsdp")
    module_type = getattr(fsdp, "FSDPModule", None)
    if module_type is None:
        return []
    names = {id(m): name for name, m in model.named_modules()}
    units = []
    for name, module in model.named_modules():
        if not isinstance(module, module_type):
            continue
        group = getattr(module._get_fsdp_state(), "_fsdp_param_group", None)
        if group is None:
            continue
        params, sizes, gathered, sharded, reduced = [], [], 0, 0, 0
        for fp in group.fsdp_params:
            info = fp._module_info
            owner = names.get(id(info.module), "")
            params.append(f"{owner}.{info.param_name}" if owner else info.param_name)
            world = fp.mesh_info.shard_mesh_size
            padded = math.prod(int(d) for d in fp.padded_sharded_param_size)
            policy = fp.mp_policy  # FSDP sets param_dtype and reduce_dtype at its lazy init (the first forward)
            orig = fp.sharded_param.dtype
            dtype = getattr(fp, "param_dtype", policy.param_dtype) or orig
            # `_orig_size`: what is all-gathered (a TP shard's local size under FSDP+TP). The unsharded parameter
            # itself is not touched: under FSDP+TP reading it changes how FSDP frees it (measured, torch 2.13).
            sizes.append(math.prod(int(d) for d in fp._orig_size) * dtype.itemsize)
            gathered += padded * world * dtype.itemsize
            shard = fp.sharded_param.to_local()
            sharded += shard.numel() * orig.itemsize
            reduced += padded * world * (getattr(fp, "reduce_dtype", policy.reduce_dtype) or dtype).itemsize
        units.append((name, tuple(params), tuple(sizes), sum(sizes), gathered, sharded, reduced,
                      group.post_forward_mesh_info is not None))
    return units
