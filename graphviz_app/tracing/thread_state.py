"""The caller's autocast, entered again on another thread: torch keeps autocast per thread.

`trace_model`, `measure` and the rest run the user's forward on the big-stack
thread (`big_stack.call_with_large_stack`); without this, a forward called inside
`with torch.autocast("cpu", dtype=torch.bfloat16):` ran there in float32. It is
entered around the forward only, as torch advises for autocast (backward outside
it), so `measure()` inside autocast counts what `measure(..., autocast=)` counts.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import torch

__all__ = ["callers_autocast", "callers_autocast_dtype"]

# The device types torch.autocast takes; one the running torch does not know is skipped.
_DEVICE_TYPES = ("cpu", "cuda", "xpu", "mps", "hpu")


def _enabled(device_type: str) -> bool:
    try:
        return bool(torch.is_autocast_enabled(device_type))
    except (RuntimeError, ValueError):
        return False


def callers_autocast() -> Callable[[], contextlib.AbstractContextManager[None]]:
    """Read on the calling thread: a context manager factory that enters the same autocast regions (device type,
    dtype, weight-cast cache) wherever it is used.

    >>> import threading, torch
    >>> with torch.autocast("cpu", dtype=torch.bfloat16):
    ...     again = callers_autocast()
    >>> seen = []
    >>> def on_another_thread():
    ...     with again():
    ...         seen.append((torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu")))
    >>> t = threading.Thread(target=on_another_thread); t.start(); t.join()
    >>> seen
    [(True, torch.bfloat16)]
    """
    regions = tuple((device_type, torch.get_autocast_dtype(device_type))
                    for device_type in _DEVICE_TYPES if _enabled(device_type))
    cache = torch.is_autocast_cache_enabled()

    @contextlib.contextmanager
    def entered() -> Iterator[None]:
        with contextlib.ExitStack() as stack:
            for device_type, dtype in regions:
                stack.enter_context(torch.autocast(device_type, dtype=dtype, cache_enabled=cache))
            yield

    return entered


def callers_autocast_dtype(device_type: str) -> torch.dtype | None:
    """The dtype of the calling thread's autocast on `device_type`, or None where it has none there.

    >>> import torch
    >>> with torch.autocast("cpu", dtype=torch.bfloat16):
    ...     callers_autocast_dtype("cpu")
    torch.bfloat16
    >>> callers_autocast_dtype("cpu") is None
    True
    """
    return torch.get_autocast_dtype(device_type) if _enabled(device_type) else None
