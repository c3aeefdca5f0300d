"""Run work on a thread with a large stack, for graphs too deep for the default one.

Since torch 2.1x an autograd node keeps the Python object that Python code
(any graph walker: ours, torchviz, torch.autograd.graph) once made for it,
and freeing such a chain recurses in C++ once per node: a graph of more than
about 100,000 ops walked from Python then crashes the process with a stack
overflow when it is freed on a default 8 MiB stack. Building, tracing and
freeing the graph inside `call_with_large_stack` avoids that, and
`release_in_order` makes a traced graph free one node at a time wherever it is
dropped.
"""

from __future__ import annotations

import gc
import sys
import threading
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any, TypeVar

__all__ = [
    "DEEP_STACK_BYTES",
    "DEEP_THREAD_NAME",
    "FREE_GUARD_NODES",
    "call_with_large_stack",
    "consumers_first",
    "on_deep_stack",
    "release_in_order",
    "sweep_released",
]

T = TypeVar("T")

DEEP_STACK_BYTES = 1 << 30  # virtual; only the pages touched are used
DEEP_THREAD_NAME = "graphviz-app-deep-stack"
# Freeing crashes near 100,000 walked ops on an 8 MiB stack; guard well below.
FREE_GUARD_NODES = 50_000

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
            worker = threading.Thread(target=target, name=DEEP_THREAD_NAME, daemon=True)
            worker.start()
        finally:
            threading.stack_size(previous)
    worker.join()
    if error:
        raise error[0]
    return result[0]


def on_deep_stack() -> bool:
    """Whether this code runs inside `call_with_large_stack`."""
    return threading.current_thread().name == DEEP_THREAD_NAME


def consumers_first(ids: Sequence[Hashable], edges: Iterable[tuple[Hashable, Hashable]]) -> list[int]:
    """Positions in `ids`, ordered so each comes after all the ids it feeds (`edges`: (src, dst)).

    Edges naming ids outside `ids` are ignored; ids on a cycle (none in
    autograd) come last, in their given order.

    >>> consumers_first(["a", "b", "c"], [("a", "b"), ("b", "c"), ("a", "c")])
    [2, 1, 0]
    """
    # Kahn's algorithm on list positions: this runs on 50,000+ node graphs.
    position = {k: i for i, k in enumerate(ids)}
    consumers = [0] * len(ids)
    feeds: list[list[int] | None] = [None] * len(ids)
    for src, dst in edges:
        s, d = position.get(src), position.get(dst)
        if s is None or d is None:
            continue
        consumers[s] += 1
        fed = feeds[d]
        if fed is None:
            feeds[d] = [s]
        else:
            fed.append(s)
    order = [i for i, c in enumerate(consumers) if c == 0]
    k = 0
    while k < len(order):
        fed = feeds[order[k]]
        k += 1
        for s in fed or ():
            consumers[s] -= 1
            if consumers[s] == 0:
                order.append(s)
    if len(order) < len(ids):
        placed = set(order)
        order.extend(i for i in range(len(ids)) if i not in placed)
    return order


class _Keeper:
    """Holds walked autograd nodes until the graph's outputs are gone, then drops them in order.

    It refers to itself, so the death of the outputs that carry it frees
    nothing at once (a tensor drops its attributes before its grad_fn): a
    sweep after each garbage collection (or the collector itself) releases
    it later, from a shallow stack, and the list then drops its nodes last
    to first, consumers before producers.
    """

    __slots__ = ("nodes", "cycle", "__weakref__")

    def __init__(self, nodes: list[Any]) -> None:
        self.nodes = nodes
        self.cycle: _Keeper | None = self

    def release(self) -> None:
        nodes, self.nodes, self.cycle = self.nodes, [], None
        del nodes  # list.__del__ drops items from the end


# Keepers whose outputs may still be alive. Swept after every collection, so
# a big graph's memory comes back soon after its outputs die, not only at
# the next full collection.
_kept: list[_Keeper] = []


def _holders(keeper: _Keeper) -> int:
    return sys.getrefcount(keeper)


def _unheld_count() -> int:
    """What `_holders` says of a kept keeper that nothing else holds."""
    probe = _Keeper([])
    box = [probe]
    del probe
    for keeper in box:
        return _holders(keeper)
    raise AssertionError("unreachable")


_UNHELD = _unheld_count()


def sweep_released() -> int:
    """Release the kept graphs whose outputs are all gone; return how many were released."""
    if not _kept:
        return 0
    still: list[_Keeper] = []
    released = 0
    for keeper in _kept:
        if _holders(keeper) <= _UNHELD:
            keeper.release()
            released += 1
        else:
            still.append(keeper)
        del keeper
    _kept[:] = still
    return released


def _after_collection(phase: str, info: dict[str, Any]) -> None:
    if phase == "stop" and _kept:
        sweep_released()


gc.callbacks.append(_after_collection)


def release_in_order(holders: Sequence[Any], nodes_consumers_first: Sequence[Any]) -> bool:
    """Make the graph behind `holders` free one node at a time, wherever it is dropped.

    Once Python has walked a grad_fn chain, torch frees it recursively, one
    C stack frame per node (a crash past ~100,000 ops). This keeps a Python
    reference to every walked node, carried by each holder (the traced
    output tensors): when the last holder dies, the nodes stay alive until
    the next garbage collection (of any generation; `gc.collect()` forces
    it), which drops them in `nodes_consumers_first` order, so each node's
    consumers are gone before it and freeing never nests. An intermediate
    tensor of the chain that outlives the outputs still frees its part of
    the graph recursively.

    Returns False if a holder refuses attributes; nothing is kept then.
    """
    sweep_released()
    # list.__del__ drops items from the end: put the first to free last.
    keeper = _Keeper(list(reversed(nodes_consumers_first)))
    try:
        for holder in holders:
            holder._graphviz_app_release = keeper
    except (AttributeError, TypeError):
        for holder in holders:
            try:
                del holder._graphviz_app_release
            except AttributeError:
                pass
        keeper.release()  # nothing freed yet: the holders still own the graph
        return False
    _kept.append(keeper)
    return True
