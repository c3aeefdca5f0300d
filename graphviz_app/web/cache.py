"""The page's shared result cache: successes only, bounded by bytes, entries and age."""

from __future__ import annotations

import pickle
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, TypeVar

from .results import Failure

__all__ = ["UNCACHED_KINDS", "ResultCache", "cacheable", "layout_stopped_by_load", "size_of"]

T = TypeVar("T")

# Failures that say something about the moment, not the program: a busy pool,
# a time-out, a killed worker, a memory limit hit while others ran, a bug.
# Stored, they would be served to every later visitor of the same link.
UNCACHED_KINDS = frozenset({"busy", "time", "overtime", "crash", "memory", "internal", "cancelled"})


# What a layout stopped at its deadline says when it got too little CPU (drawing.layout.LayoutTimeout).
_BUSY_LAYOUT = "the machine was busy"


def layout_stopped_by_load(value: object) -> bool:
    """Whether `value` is a layout stopped at its deadline because the machine was busy (it said so, measured).

    >>> layout_stopped_by_load(Failure("laying out 9 nodes with dot took over 9 s; it got 1.0 s of CPU in "
    ...                                "that time: the machine was busy, so ...", kind="render"))
    True
    """
    return isinstance(value, Failure) and value.kind == "render" and _BUSY_LAYOUT in value.message


def cacheable(value: object) -> bool:
    """Whether `value` may be served to the next visitor: a result, or a failure of the program itself.

    Never a failure of the moment (`UNCACHED_KINDS`), nor a layout stopped because the machine was busy.
    """
    if isinstance(value, Failure) and value.kind in UNCACHED_KINDS:
        return False
    return not layout_stopped_by_load(value)


def size_of(value: object) -> int:
    """Bytes `value` holds, as its pickle (SVG, DOT and JSON text dominate)."""
    return len(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))


@dataclass(slots=True)
class _Entry:
    value: Any
    size: int
    stored: float


class ResultCache:
    """A thread-safe LRU of results keyed by program and options; shared by all sessions.

    Args:
        max_bytes: Total size kept; least recently used entries go first.
        max_entries: Most entries kept.
        max_age_s: Seconds an entry is served after it was stored.
        clock: Seconds, monotonic (tests pass a fake one).
    """

    def __init__(
        self, *, max_bytes: int = 256 * 1024**2, max_entries: int = 256, max_age_s: float = 3600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_bytes, self.max_entries, self.max_age_s = max_bytes, max_entries, max_age_s
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: OrderedDict[Hashable, _Entry] = OrderedDict()
        self._bytes = 0

    @property
    def bytes(self) -> int:
        """Bytes held now."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Hashable) -> Any | None:
        """The value stored under `key`, or None when absent or too old."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            if self._clock() - entry.stored > self.max_age_s:
                self._drop(key)
                return None
            self._entries.move_to_end(key)
            return entry.value

    def put(self, key: Hashable, value: object) -> bool:
        """Store `value` if it is cacheable and fits; True when stored."""
        if not cacheable(value):
            return False
        size = size_of(value)
        if size > self.max_bytes:
            return False  # one huge graph must not empty the cache for everyone else
        with self._lock:
            if key in self._entries:
                self._drop(key)
            self._entries[key] = _Entry(value, size, self._clock())
            self._bytes += size
            while self._bytes > self.max_bytes or len(self._entries) > self.max_entries:
                self._drop(next(iter(self._entries)))
        return True

    def get_or_run(self, key: Hashable, compute: Callable[[], T]) -> T:
        """The cached value for `key`, or `compute()` (stored only when cacheable)."""
        found = self.get(key)
        if found is not None:
            return found
        value = compute()
        self.put(key, value)
        return value

    def clear(self) -> None:
        """Forget everything."""
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    def _drop(self, key: Hashable) -> None:
        entry = self._entries.pop(key)
        self._bytes -= entry.size
