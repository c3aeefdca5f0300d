"""Turn live torch tensors into plain TensorInfo records."""

from __future__ import annotations

import math
from typing import Any

import torch

from ..model import Scalar, TensorInfo
from .distributed.shards import ShardLookup
from .fast_records import new_tensor_info
from .torch_internals import storage_identity

__all__ = ["MAX_VALUES", "TensorDescriber", "dtype_name"]

MAX_VALUES = 16


def dtype_name(dtype: torch.dtype) -> str:
    """`torch.float32` -> `float32`."""
    return str(dtype).removeprefix("torch.")


def _shape(t: torch.Tensor) -> tuple[int, ...]:
    if not t.is_nested:
        return tuple(t.shape)
    # A nested tensor's parts differ in size (torch has no plain shape for
    # it): give the padded shape, as to_padded_tensor() would make it.
    parts = t.detach().unbind()
    dims = [max((p.shape[d] for p in parts), default=0) for d in range(t.dim() - 1)]
    return (len(parts), *dims)


def _small_values(t: torch.Tensor, is_complex: bool, is_float: bool) -> tuple[Scalar, ...] | None:
    """The values of `t`, a dense tensor with values (not meta, sparse or nested) of at most MAX_VALUES elements."""
    try:
        flat = _flat_list(t)
    except RuntimeError:
        return None
    if is_complex:
        return tuple(str(v) for v in flat)
    if is_float:
        # nan/inf as text: JSON has no such numbers, and nan != nan would make
        # a graph differ from its own JSON round trip.
        # A nan or inf anywhere makes the sum nan or inf: one C call covers
        # the common all-finite case (an overflowing sum just takes the scan).
        if math.isfinite(sum(flat)) or all(map(math.isfinite, flat)):
            return tuple(flat)
        return tuple(v if math.isfinite(v) else str(v) for v in flat)
    return tuple(flat)


def _flat_list(t: torch.Tensor) -> list[Any]:
    """`t.detach().reshape(-1).cpu().tolist()` for a tensor of at most 16 elements.

    One `tolist()` and a flatten in Python cost a fraction of the four
    dispatched torch calls (this runs for every small tensor of a graph).
    """
    if type(t) is not torch.Tensor and type(t) is not torch.nn.Parameter:
        return t.detach().reshape(-1).cpu().tolist()  # a subclass may override any of them
    if t.dim() <= 1:
        nested = t.tolist()
        return nested if type(nested) is list else [nested]
    flat: list[Any] = []
    stack = [t.tolist()]
    while stack:  # depth-first, left to right: row-major order
        item = stack.pop()
        if type(item) is list:
            stack.extend(reversed(item))
        else:
            flat.append(item)
    return flat


class TensorDescriber:
    """Describes tensors, naming storages `s0`, `s1`, ... in first-seen order.

    Op metadata records (no values) repeat a lot on big graphs, so identical
    ones are shared rather than allocated per node. Leaf tensors (parameters,
    buffers) are often saved by several ops and are described once; other
    saved tensors come out of autograd as a new Python object on every read,
    so they are not cached.
    """

    def __init__(self) -> None:
        self._storages: dict[tuple[str, int], str] = {}
        # (shape, dtype, device) -> the record from_metadata made of it; a
        # walker reads it first to skip the call for the common case.
        self.meta_records: dict[tuple[Any, ...], TensorInfo] = {}
        # device -> (its text, whether it is meta); dtype -> (name, element
        # size, is complex, is floating point): read once per walk.
        self._devices: dict[torch.device, tuple[str, bool]] = {}
        self._dtypes: dict[torch.dtype, tuple[str, int, bool, bool]] = {}
        # id(leaf) -> (leaf, its record's fields but the name); holding the
        # leaf keeps its id from being reused by another tensor.
        self._leaves: dict[int, tuple[torch.Tensor, tuple[Any, ...]]] = {}
        self._shards = ShardLookup()  # a rank's DTensors and FSDP's unsharded parameters

    def describe(self, t: torch.Tensor, name: str | None) -> TensorInfo:
        """A full record of `t`, with values when it has at most 16 elements."""
        if self._shards.active:
            shard = self._shards.find(t)
            if shard is not None:  # what this rank holds: the local shard, with how the whole is laid out
                local, sharding, param_name = shard
                fields = self._fields(local)
                return new_tensor_info(name or param_name, *fields[:5], t.requires_grad, *fields[6:], False, sharding)
        if t.is_leaf:
            cached = self._leaves.get(id(t))
            if cached is None:
                cached = self._leaves[id(t)] = (t, self._fields(t))
            return new_tensor_info(name, *cached[1])
        return new_tensor_info(name, *self._fields(t))

    def _fields(self, t: torch.Tensor) -> tuple[Any, ...]:
        """TensorInfo's fields after the name, each torch property read once.

        Runs for every tensor of a graph, so it is one flat function: device
        and dtype texts come from per-walk caches (str() of a device costs
        more than the rest of a field).
        """
        dev = t.device
        device = self._devices.get(dev)
        if device is None:
            device = self._devices[dev] = (str(dev), dev.type == "meta")
        dtype = t.dtype
        known = self._dtypes.get(dtype)
        if known is None:
            known = self._dtypes[dtype] = (
                dtype_name(dtype), t.element_size(), dtype.is_complex, dtype.is_floating_point
            )
        numel = t.numel()
        storage_bytes = None
        try:
            untyped = t.untyped_storage()
            ptr = untyped.data_ptr()
        except (RuntimeError, NotImplementedError):
            storage = None
        else:
            storage_bytes = untyped.nbytes()
            # Meta and empty storages all have address 0: tell them apart by the
            # storage object itself, alive while the walk keeps its tensors.
            key = (device[0], ptr) if ptr else (device[0], -storage_identity(untyped))
            storage = self._storages.get(key)
            if storage is None:
                storage = self._storages[key] = f"s{len(self._storages)}"
        nested = t.is_nested
        values = None
        if numel <= MAX_VALUES and not device[1] and not nested and not t.is_sparse:
            values = _small_values(t, known[2], known[3])
        return (
            tuple(t.shape) if not nested else _shape(t), known[0], device[0], numel, numel * known[1],
            t.requires_grad, values, storage, False, storage_bytes,
        )

    def known_storage(self, t: torch.Tensor) -> str | None:
        """The name already given to `t`'s storage in this walk, or None if no tensor described so far lives in it."""
        try:
            untyped = t.untyped_storage()
            ptr = untyped.data_ptr()
        except (RuntimeError, NotImplementedError):
            return None
        device = str(t.device)
        return self._storages.get((device, ptr) if ptr else (device, -storage_identity(untyped)))

    def from_metadata(
        self, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device
    ) -> TensorInfo:
        """A record of a forward result known only by its metadata."""
        key = (shape, dtype, device)
        info = self.meta_records.get(key)
        if info is None:
            numel = 1
            for s in shape:
                numel *= s
            info = new_tensor_info(
                None, shape, dtype_name(dtype), str(device), numel, numel * dtype.itemsize, True
            )
            self.meta_records[key] = info
        return info

    @staticmethod
    def freed(name: str) -> TensorInfo:
        """A saved tensor that backward() released: nothing is known of it."""
        return TensorInfo(
            name=name, shape=(), dtype="unknown", device="unknown",
            numel=0, bytes=0, requires_grad=False, freed=True,
        )
