"""Turn live torch tensors into plain TensorInfo records."""

from __future__ import annotations

import math
from typing import Any

import torch

from .model import Scalar, TensorInfo

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


def _values(t: torch.Tensor) -> tuple[Scalar, ...] | None:
    if t.numel() > MAX_VALUES or t.is_sparse or t.is_nested or t.device.type == "meta":
        return None
    try:
        flat = t.detach().reshape(-1).cpu().tolist()
    except RuntimeError:
        return None
    if t.is_complex():
        return tuple(str(v) for v in flat)
    if t.is_floating_point():
        # nan/inf as text: JSON has no such numbers, and nan != nan would make
        # a graph differ from its own JSON round trip.
        return tuple(v if math.isfinite(v) else str(v) for v in flat)
    return tuple(flat)


class TensorDescriber:
    """Describes tensors, naming storages `s0`, `s1`, ... in first-seen order.

    Op metadata records (no values) repeat a lot on big graphs, so identical
    ones are shared rather than allocated per node.
    """

    def __init__(self) -> None:
        self._storages: dict[tuple[str, int], str] = {}
        self._meta_cache: dict[tuple[Any, ...], TensorInfo] = {}

    def _storage_id(self, t: torch.Tensor) -> str | None:
        try:
            storage = t.untyped_storage()
            ptr = storage.data_ptr()
        except (RuntimeError, NotImplementedError):
            return None
        # Meta and empty storages all have address 0: tell them apart by the
        # storage object itself, alive while the walk keeps its tensors.
        key = (str(t.device), ptr) if ptr else (str(t.device), -storage._cdata)
        if key not in self._storages:
            self._storages[key] = f"s{len(self._storages)}"
        return self._storages[key]

    def describe(self, t: torch.Tensor, name: str | None) -> TensorInfo:
        """A full record of `t`, with values when it has at most 16 elements."""
        return TensorInfo(
            name=name,
            shape=_shape(t),
            dtype=dtype_name(t.dtype),
            device=str(t.device),
            numel=t.numel(),
            bytes=t.numel() * t.element_size(),
            requires_grad=t.requires_grad,
            values=_values(t),
            storage=self._storage_id(t),
        )

    def from_metadata(
        self, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device
    ) -> TensorInfo:
        """A record of a forward result known only by its metadata."""
        key = (shape, dtype, device)
        info = self._meta_cache.get(key)
        if info is None:
            numel = 1
            for s in shape:
                numel *= s
            info = TensorInfo(
                name=None,
                shape=shape,
                dtype=dtype_name(dtype),
                device=str(device),
                numel=numel,
                bytes=numel * dtype.itemsize,
                requires_grad=True,
            )
            self._meta_cache[key] = info
        return info

    @staticmethod
    def freed(name: str) -> TensorInfo:
        """A saved tensor that backward() released: nothing is known of it."""
        return TensorInfo(
            name=name, shape=(), dtype="unknown", device="unknown",
            numel=0, bytes=0, requires_grad=False, freed=True,
        )
