"""The single-process counter (`LiveStorages`) taught what a rank of a distributed step does to memory.

Two things a rank does that a single process does not: FSDP2 frees and re-makes
its unsharded parameters by resizing their storages (`UntypedStorage.resize_`,
which no dispatch mode sees; torch's MemTracker patches it for the same reason),
and tensor parallelism runs ops on DTensors, whose local shards are what the
rank holds. `RankStorages` counts both, and is otherwise `LiveStorages`.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.distributed.tensor import DTensor

from ...analysis.distributed import CollectiveEvent
from ..memory.counting import LiveStorages, tensors_in
from ..torch_internals import dtensor_shape_propagator, fake_tensor_api, wait_tensor_op

__all__ = ["RankStorages"]

_WAIT = wait_tensor_op()
_ACTIVE_FAKE_MODE = fake_tensor_api()[3]
_COLLECTIVES = frozenset({"c10d", "_c10d_functional"})
# Ops of those namespaces that send nothing: wait_tensor (`_WAIT`) and the wrapper that lets autograd reach an
# AsyncCollectiveTensor (DTensor's redistribution runs it beside each functional all-reduce).
_NOT_SENT = frozenset({"_wrap_tensor_autograd"})


class RankStorages(LiveStorages):
    """`LiveStorages` that also counts storage resizes and sees DTensor ops as their local ops.

    A storage resized while the counter is on counts its new size from then on
    (a storage made before the step, resized from 0, counts what it grew by;
    resized back to 0, it counts nothing again). An op on DTensors is handed to
    DTensor first (`NotImplemented`), so the counter sees the ops on the local
    shards it turns into, as torch's MemTracker does. Every collective op
    (`c10d`, `_c10d_functional`) is kept in `events` with its largest buffer's
    bytes and the `phase` the caller set ("forward", "backward", "optimizer").
    """

    def __init__(self) -> None:
        super().__init__()
        self.phase = "forward"
        self.events: list[CollectiveEvent] = []
        self._resize: Any = None
        self._propagate: Any = None

    def __enter__(self) -> RankStorages:
        super().__enter__()
        self._resize = original = torch.UntypedStorage.resize_
        counter = self

        def resize_(st: torch.UntypedStorage, size: int) -> Any:
            out = original(st, size)
            if not counter.paused:
                counter._storage_resized(st)
            return out

        torch.UntypedStorage.resize_ = resize_  # type: ignore[method-assign, assignment]
        propagator = dtensor_shape_propagator()
        self._propagate = propagate = propagator._propagate_tensor_meta_non_cached  # type: ignore[attr-defined]

        def shapes_only(prop: Any, *args: Any, **kwargs: Any) -> Any:
            paused, counter.paused = counter.paused, True
            try:
                return propagate(prop, *args, **kwargs)
            finally:
                counter.paused = paused

        propagator._propagate_tensor_meta_non_cached = shapes_only  # type: ignore[attr-defined]
        return self

    def __exit__(self, *exc: Any) -> None:
        torch.UntypedStorage.resize_ = self._resize  # type: ignore[method-assign]
        dtensor_shape_propagator()._propagate_tensor_meta_non_cached = self._propagate  # type: ignore[attr-defined]
        super().__exit__(*exc)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if any(issubclass(t, DTensor) for t in types):
            return NotImplemented  # DTensor turns it into ops on its local shards, which come back here
        if func is _WAIT and _ACTIVE_FAKE_MODE() is not None:
            # Fake tensors' wait_tensor makes a new tensor; a real one hands back the tensor it waited on.
            return args[0]
        out = super().__torch_dispatch__(func, types, args, kwargs)
        op = func.__name__.split(".")[0]
        if func.namespace in _COLLECTIVES and func is not _WAIT and op not in _NOT_SENT and not self.paused:
            sizes = [t.numel() * t.element_size() for t in tensors_in((args, kwargs, out))]
            node = self.marks[-1][0] if self.marks else None  # the backward node running, when marked
            self.events.append(CollectiveEvent(op, max(sizes, default=0), self.phase, self.live, node))
        return out

    def _storage_resized(self, st: torch.UntypedStorage) -> None:
        """A storage resized outside any op: counted from now at its new size, or its count follows the size."""
        if id(st) in self._refs:
            self._follow_resize(st)
        elif st.nbytes():  # made before the step (FSDP's unsharded parameter, freed to 0 bytes), grown again
            self._count(st)
