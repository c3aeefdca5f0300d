"""Run work on a thread with a large stack, for graphs too deep for the default one.

Since torch 2.1x an autograd node keeps the Python object that Python code
(any graph walker: ours, torchviz, torch.autograd.graph) once made for it,
and freeing such a chain recurses in C++ once per node: a graph of more than
about 100,000 ops walked from Python then crashes the process with a stack
overflow when it is freed on a default 8 MiB stack. Building, tracing and
freeing the graph inside `call_with_large_stack` avoids that, and
`release_in_order` (which `trace` calls past FREE_GUARD_NODES) makes a walked
graph free one node at a time wherever and whenever it is dropped.
"""

from __future__ import annotations

import atexit
import ctypes
import gc
import sys
import threading
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any, TypeVar

__all__ = [
    "DEEP_STACK_BYTES",
    "DEEP_THREAD_NAME",
    "FREE_GUARD_NODES",
    "call_with_large_stack",
    "consumers_first",
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
    """Python references to walked autograd nodes, to drop consumers first once nothing else holds them.

    `nodes` is in reverse consumers-first order (the first to drop last), so
    even a plain `list.__del__`, which drops items from the end, frees safely.
    """

    __slots__ = ("nodes",)

    def __init__(self, nodes_consumers_first: Sequence[Any]) -> None:
        self.nodes: list[Any] = list(reversed(nodes_consumers_first))

    def sweep(self) -> bool:
        """Drop the nodes nothing else holds, consumers first; True once all are dropped."""
        nodes = self.nodes
        if nodes and sys.getrefcount(nodes[-1]) > _UNHELD:
            return False  # its first consumer is still held: the graph is in use
        kept: list[Any] = []
        for i in range(len(nodes) - 1, -1, -1):
            # A node's Python object counts one more reference while anything
            # but it holds the node (a tensor, a consumer node, user code):
            # dropping it then would hand it back to torch's recursive free.
            if sys.getrefcount(nodes[i]) > _UNHELD:
                kept.append(nodes[i])
            else:
                _kept_ids.discard(id(nodes[i]))
            nodes[i] = None  # frees it if unheld; its producers stay in the list
        kept.reverse()
        self.nodes = kept
        return not kept


# What sys.getrefcount(nodes[i]) reads for an item only its list holds.
_UNHELD = 2

# Graphs traced past FREE_GUARD_NODES whose nodes are not all dropped yet,
# swept after every garbage collection (any generation) and every trace.
_kept: list[_Keeper] = []
# id() of every node some keeper holds: a graph traced twice is kept once,
# else each keeper would see the other's reference and never let go.
_kept_ids: set[int] = set()


# One sweep at a time: a collection can start inside a sweep (or another
# thread's), and a sweep must not rewrite _kept under a trace adding to it.
_sweep_lock = threading.Lock()


def sweep_released() -> int:
    """Drop what nothing holds any more of the kept graphs; return how many graphs are done."""
    if not _sweep_lock.acquire(blocking=False):
        return 0  # a sweep is running (maybe the one that started this collection)
    try:
        done = 0
        progress = True
        while progress and _kept:  # freeing one graph can free the head of another
            progress = False
            still: list[_Keeper] = []
            for keeper in _kept:
                before = len(keeper.nodes)
                if keeper.sweep():
                    done += 1
                else:
                    still.append(keeper)
                progress = progress or len(keeper.nodes) < before
            _kept[:] = still
        return done
    finally:
        _sweep_lock.release()


def _after_collection(phase: str, info: dict[str, Any]) -> None:
    if phase == "stop" and _kept:
        sweep_released()


def _keep_forever_at_exit() -> None:
    # At exit the interpreter frees module globals in an order we do not
    # control: a keeper freed before the tensors holding its graph would hand
    # the nodes back to torch's recursive free. The process is ending: leak them.
    for keeper in _kept:
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(keeper))


gc.callbacks.append(_after_collection)
atexit.register(_keep_forever_at_exit)


def release_in_order(nodes_consumers_first: Sequence[Any]) -> None:
    """Make a walked graph free one node at a time once nothing else holds it.

    Once Python has walked a grad_fn chain, torch frees it recursively, one
    C stack frame per node (a crash past ~100,000 ops). This keeps a Python
    reference to every walked node: when the graph's outputs die, nothing
    is freed at once; the sweep after the next garbage collection of any
    generation (`gc.collect()` forces one) drops the nodes nothing else
    holds in `nodes_consumers_first` order, so each node's consumers are gone
    before it and freeing never nests. Nodes still held (a live intermediate
    tensor) are kept, with their producers, until a later sweep finds them free.
    """
    sweep_released()
    with _sweep_lock:
        fresh = [n for n in nodes_consumers_first if id(n) not in _kept_ids]
        if fresh:
            _kept_ids.update(id(n) for n in fresh)
            _kept.append(_Keeper(fresh))
