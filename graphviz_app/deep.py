"""Run work on a thread with a large stack, for graphs too deep for the default one.

Since torch 2.1x an autograd node keeps the Python object that Python code
(any graph walker: ours, torchviz, torch.autograd.graph) once made for it,
and freeing such a chain recurses in C++ once per node: a graph of more than
about 100,000 ops walked from Python then crashes the process with a stack
overflow when it is freed on a default 8 MiB stack. Building, tracing and
freeing the graph inside `call_with_large_stack` avoids that.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["DEEP_STACK_BYTES", "call_with_large_stack"]

T = TypeVar("T")

DEEP_STACK_BYTES = 1 << 30  # virtual; only the pages touched are used

_stack_size_lock = threading.Lock()


def call_with_large_stack(fn: Callable[..., T], *args: Any, stack_bytes: int = DEEP_STACK_BYTES) -> T:
    """Call `fn(*args)` on a new thread with a `stack_bytes` stack; return or raise as it did.

    Whatever `fn` creates and drops (e.g. a deep autograd graph) is freed on
    that thread, so only its return value should hold tensors you keep.

    >>> call_with_large_stack(sum, [1, 2, 3])
    6
    """
    result: list[Any] = []
    error: list[BaseException] = []

    def target() -> None:
        try:
            result.append(fn(*args))
        except BaseException as e:  # re-raised on the caller's thread below
            error.append(e)

    with _stack_size_lock:  # threading.stack_size is process-wide
        previous = threading.stack_size(stack_bytes)
        try:
            worker = threading.Thread(target=target, name="graphviz-app-deep-stack", daemon=True)
            worker.start()
        finally:
            threading.stack_size(previous)
    worker.join()
    if error:
        raise error[0]
    return result[0]
