"""Count the bytes of every storage that ops allocate while a dispatch mode is on, as long as each lives."""

from __future__ import annotations

import weakref
from typing import Any

import torch

from ..torch_internals import TorchDispatchMode

__all__ = ["LiveStorages", "LiveCuda", "tensors_in"]


def tensors_in(value: Any) -> list[torch.Tensor]:
    """The tensors in an op's result or arguments (tensors, and tuples, lists and dicts of them)."""
    found: list[torch.Tensor] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, torch.Tensor):
            found.append(item)
        elif isinstance(item, (tuple, list)):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
    return found


def _storage(t: torch.Tensor) -> torch.UntypedStorage | None:
    try:
        return t.untyped_storage()
    except (RuntimeError, NotImplementedError):  # sparse and other storage-less tensors
        return None


class LiveStorages(TorchDispatchMode):
    """While on, every storage an op allocates counts, from its allocation until it is freed.

    A storage counts when an op returns a tensor living in it and no argument
    of the op lives in it (a view, an in-place op or `out=` reuses memory that
    exists). Storages made before the mode (parameters, buffers, inputs) never
    count. torch keeps one Python object per live storage, so a weak reference
    to it says when the memory goes. `live` is the bytes alive now, `peak` the
    most so far; `mark(label)` starts an interval whose start and peak are
    recorded in `marks` as [label, live at start, peak during, live at end].
    Works on any device, `meta` included (storages there have sizes, no memory).
    """

    def __init__(self) -> None:
        super().__init__()
        self.live = 0
        self.peak = 0
        self.paused = False
        self.marks: list[list[Any]] = []
        self._refs: dict[int, weakref.ref[torch.UntypedStorage]] = {}
        self._sizes: dict[int, int] = {}  # bytes counted per storage (a storage may be resized)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if self.paused:
            return out
        inputs: set[int] | None = None
        for t in tensors_in(out):
            st = _storage(t)
            if st is None:
                continue
            if id(st) in self._refs:
                self._follow_resize(st)  # an out= op may grow a storage counted before (MemTracker counts it)
                continue
            if inputs is None:
                inputs = {id(s) for s in map(_storage, tensors_in((args, kwargs))) if s is not None}
            if id(st) not in inputs:
                self._count(st)
        return out

    def _count(self, st: torch.UntypedStorage) -> None:
        size = st.nbytes()
        key = id(st)

        def gone(_: object, key: int = key) -> None:
            self._refs.pop(key, None)
            self.live -= self._sizes.pop(key, 0)
            if self.marks:
                self.marks[-1][3] = self.live

        self._refs[key] = weakref.ref(st, gone)
        self._sizes[key] = 0
        self._grow(key, size)

    def _follow_resize(self, st: torch.UntypedStorage) -> None:
        size = st.nbytes()
        if size != self._sizes.get(id(st), size):
            self._grow(id(st), size - self._sizes[id(st)])

    def _grow(self, key: int, delta: int) -> None:
        self._sizes[key] += delta
        self.live += delta
        if self.live > self.peak:
            self.peak = self.live
        if self.marks:
            mark = self.marks[-1]
            mark[2] = max(mark[2], self.live)
            mark[3] = self.live

    def mark(self, label: Any) -> None:
        """Start a new interval (a backward node about to run) at the live bytes now."""
        self.marks.append([label, self.live, self.live, self.live])

    def interval(self) -> tuple[int, int]:
        """(live bytes at the start of the current interval, the most alive since it started)."""
        if not self.marks:
            return self.live, self.peak
        return self.marks[-1][1], self.marks[-1][2]


class LiveCuda:
    """The same record as LiveStorages on a CUDA device, from the caching allocator's counters.

    `live` is `torch.cuda.memory_allocated()` less what was allocated when the
    counter started (parameters, buffers, inputs); an interval's peak comes from
    `max_memory_allocated()`, reset at every mark. Allocator blocks are rounded
    up (512 bytes at least), so small tensors read larger than their storages.
    """

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.base = 0
        self.paused = False
        self.marks: list[list[Any]] = []
        self._peak = 0

    @property
    def live(self) -> int:
        return int(torch.cuda.memory_allocated(self.device)) - self.base

    @property
    def peak(self) -> int:
        return max(self._peak, int(torch.cuda.max_memory_allocated(self.device)) - self.base)

    def __enter__(self) -> LiveCuda:
        torch.cuda.synchronize(self.device)
        self.base = int(torch.cuda.memory_allocated(self.device))
        torch.cuda.reset_peak_memory_stats(self.device)
        return self

    def __exit__(self, *exc: object) -> None:
        self._close()

    def _close(self) -> None:
        peak = int(torch.cuda.max_memory_allocated(self.device)) - self.base
        self._peak = max(self._peak, peak)
        if self.marks:
            self.marks[-1][2] = max(self.marks[-1][2], peak)
            self.marks[-1][3] = self.live

    def interval(self) -> tuple[int, int]:
        """(live bytes at the start of the current interval, the most allocated since it started)."""
        peak = int(torch.cuda.max_memory_allocated(self.device)) - self.base
        if not self.marks:
            return self.live, max(self._peak, peak)
        return self.marks[-1][1], max(self.marks[-1][2], peak)

    def mark(self, label: Any) -> None:
        self._close()
        torch.cuda.reset_peak_memory_stats(self.device)
        live = self.live
        self.marks.append([label, live, live, live])
