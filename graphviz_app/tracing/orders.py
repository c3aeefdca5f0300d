"""Number the orders of derivatives: which backward (with `create_graph=True`) made each autograd node."""

from __future__ import annotations

import bisect
import dataclasses
import threading
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any

import torch

from ..model import Graph, NodeKind
from ..model.annotations import OUTSIDE_ATTR  # the attribute naming a node the graph does not reach
from .torch_internals import RunBackward, is_leaf_node, next_sequence_nr, sequence_nr, wrap_run_backward

__all__ = ["record_orders", "RecordOrders", "add_orders", "orders_written", "ORDER_KEY", "PARENT_KEY",
           "PARENT_NAME_KEY", "OUTSIDE_ATTR"]

# What record_orders() writes into the public `grad_fn.metadata` of each node a backward made.
ORDER_KEY = "graphviz_app.order"
PARENT_KEY = "graphviz_app.differentiates"  # the sequence number of the node whose backward made it
PARENT_NAME_KEY = "graphviz_app.differentiates_name"  # ... and its class name


class _ThreadState(threading.local):
    def __init__(self) -> None:
        self.depth = 0  # record_orders() blocks open on this thread


_state = _ThreadState()
_lock = threading.Lock()
_undo: list[Any] = []
_users = 0
_written = False


def orders_written() -> bool:
    """Whether any node of this process may carry an order written by `record_orders()`."""
    return _written


def record_orders() -> RecordOrders:
    """Number the nodes that each backward run with `create_graph=True` makes inside the block.

    Every `torch.autograd.grad(..., create_graph=True)` or `.backward(create_graph=True)`
    called inside `with record_orders():` tags the nodes it makes (in their public
    `grad_fn.metadata`) with their order, one more than the highest order in the graph
    it differentiates (forward nodes are order 0: the first such backward makes order
    1, the backward of that order 2), and with the node whose backward made each one.
    `trace()` copies them into `Node.order` and `Node.differentiates`.

    Returns:
        A context manager; it records only the thread that entered it and restores
        torch on exit, also when the block raises. Blocks may nest.

    >>> x = torch.tensor([0.5], requires_grad=True)
    >>> with record_orders():
    ...     (g,) = torch.autograd.grad(torch.tanh(x).sum(), x, create_graph=True)
    >>> g.grad_fn.metadata[ORDER_KEY]
    1
    """
    return RecordOrders()


class RecordOrders:
    """The context manager `record_orders()` returns."""

    def __enter__(self) -> RecordOrders:
        global _users
        with _lock:
            if _users == 0:
                _undo.append(wrap_run_backward(_observed))
            _users += 1
        _state.depth += 1
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        global _users
        _state.depth -= 1
        with _lock:
            _users -= 1
            if _users == 0:
                while _undo:
                    _undo.pop()()


def _observed(original: RunBackward) -> RunBackward:
    def run_backward(t_outputs: Any, *args: Any, **kwargs: Any) -> Any:
        create_graph = args[2] if len(args) > 2 else kwargs.get("create_graph", False)
        if not _state.depth or not create_graph:
            return original(t_outputs, *args, **kwargs)
        return _Pass(t_outputs, args[0] if args else None).run(original, t_outputs, *args, **kwargs)

    return run_backward


def _roots(values: Any) -> list[Any]:
    """The autograd nodes behind tensors (or GradientEdges), None and leaves left out."""
    items = values if isinstance(values, (tuple, list)) else (values,)
    found = []
    for v in items:
        fn = v.grad_fn if isinstance(v, torch.Tensor) else getattr(v, "node", None)
        if fn is not None:
            found.append(fn)
    return found


def _reachable(roots: Iterable[Any], stop: set[Any] | frozenset[Any] = frozenset()) -> list[Any]:
    """The nodes reachable from `roots` through next_functions, those in `stop` not entered."""
    seen: set[Any] = set(stop)
    found: list[Any] = []
    todo = [fn for fn in roots if fn not in seen]
    seen.update(todo)
    while todo:
        fn = todo.pop()
        found.append(fn)
        for child, _ in fn.next_functions:
            if child is not None and child not in seen:
                seen.add(child)
                todo.append(child)
    return found


class _Pass:
    """One backward run with create_graph=True: the graph it differentiates, and who made what."""

    def __init__(self, t_outputs: Any, grad_outputs: Any) -> None:
        self.before = _reachable(_roots(t_outputs))
        # Tensors given as gradients may have graphs of their own: not made by this pass.
        self.given = _reachable(_roots(grad_outputs if grad_outputs is not None else ()), set(self.before))
        self.order = 1 + max((self._order_of(fn) for fn in self.before), default=0)
        self.starts: list[int] = []  # sequence number at which each node's backward began ...
        self.parents: list[tuple[int, str]] = []  # ... and that node: (its sequence number, its name)
        self.hooks = [fn.register_prehook(self._prehook(fn)) for fn in self.before if not is_leaf_node(fn)]

    @staticmethod
    def _order_of(fn: Any) -> int:
        if is_leaf_node(fn):
            return 0
        order = fn.metadata.get(ORDER_KEY)
        return order if isinstance(order, int) else 0

    def _prehook(self, fn: Any) -> Any:
        seq, name = sequence_nr(fn), type(fn).__name__

        def hook(grad_outputs: Any) -> None:
            self.starts.append(next_sequence_nr())
            self.parents.append((seq, name))

        return hook

    def run(self, original: RunBackward, t_outputs: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            result = original(t_outputs, *args, **kwargs)
        finally:
            for handle in self.hooks:
                handle.remove()
        leaves = []
        if kwargs.get("accumulate_grad"):  # .backward(): the gradients went into the leaves' .grad
            leaves = [fn.variable.grad for fn in self.before if is_leaf_node(fn) and fn.variable.grad is not None]
        made = _reachable(_roots(result) + _roots(leaves), set(self.before) | set(self.given))
        self._tag([fn for fn in made if not is_leaf_node(fn)])
        return result

    def _tag(self, made: list[Any]) -> None:
        global _written
        _written = True
        for fn in made:
            meta = fn.metadata
            if ORDER_KEY in meta:  # made by an inner backward (a Function's backward calling grad)
                continue
            meta[ORDER_KEY] = self.order
            # Nodes made while a node's backward ran follow its prehook in this thread's
            # sequence numbers (the CPU engine runs on the calling thread).
            at = bisect.bisect_right(self.starts, sequence_nr(fn)) - 1
            if at >= 0:
                meta[PARENT_KEY], meta[PARENT_NAME_KEY] = self.parents[at]


def add_orders(graph: Graph, fns: Mapping[str, Any]) -> Graph:
    """The graph with `Node.order` and `Node.differentiates` read from the tags `record_orders()` wrote.

    Ops without a tag made by a recorded backward are order 0 once any node has
    one; `differentiates` names the node id of the node whose backward made it,
    when that node is in the graph; when it is not, the attribute `differentiates`
    names it (`MulBackward0 (seq_nr 2), not in this graph`).
    """
    ops = [(i, n) for i, n in enumerate(graph.nodes) if n.kind is NodeKind.OP and n.id in fns]
    tags: dict[int, tuple[int, Any, Any]] = {}
    id_of_seq: dict[int, str] = {}
    for index, node in ops:
        fn = fns[node.id]
        id_of_seq[sequence_nr(fn)] = node.id
        meta = fn.metadata
        order = meta.get(ORDER_KEY) if meta else None
        if isinstance(order, int):
            tags[index] = (order, meta.get(PARENT_KEY), meta.get(PARENT_NAME_KEY))
    if not tags:
        return graph
    nodes = list(graph.nodes)
    for index, node in ops:
        order, parent, parent_name = tags.get(index, (0, None, None))
        parent_id = id_of_seq.get(parent)
        attrs = node.attrs
        if parent_id is None and parent is not None:
            attrs += ((OUTSIDE_ATTR, f"{parent_name or 'a node'} (seq_nr {parent}), not in this graph"),)
        nodes[index] = dataclasses.replace(node, order=order, differentiates=parent_id, attrs=attrs)
    return dataclasses.replace(graph, nodes=tuple(nodes))
