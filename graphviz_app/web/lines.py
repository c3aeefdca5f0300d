"""Which program line made each op: the evaluator run with a line recorder (worker side).

Like `jobs`, this runs only inside the isolated worker and imports torch
inside its functions, so the server never loads it.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from ..model import Graph, NodeKind

__all__ = ["LineMap", "evaluate_with_lines", "line_of"]


def evaluate_with_lines(program: str, *, device: str | None, dtype: Any) -> tuple[Any, LineMap]:
    """`expr.evaluate`, also returning id(grad_fn) -> program line for every op the program called.

    Raises:
        ExprError: as `evaluate`.
    """
    from torch.overrides import TorchFunctionMode

    from ..expr.api import resolve_device, resolve_dtype
    from ..expr.evaluator import Interpreter
    from ..expr.limits import Limits
    from ..expr.validator import parse

    class LineInterpreter(Interpreter):
        line = 0

        def _tick(self, node: Any) -> None:
            self.line = getattr(node, "lineno", self.line)
            super()._tick(node)

    lines: dict[int, int] = {}
    keep: list[Any] = []

    class LineMode(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            out = func(*args, **(kwargs or {}))
            for t in out if isinstance(out, (tuple, list)) else (out,):
                fn = getattr(t, "grad_fn", None)
                if fn is not None and id(fn) not in lines:
                    lines[id(fn)] = interpreter.line
                    keep.append(fn)
            return out

    limits = Limits()
    interpreter = LineInterpreter(parse(program, limits=limits), limits=limits,
                                  device=resolve_device(device), dtype=resolve_dtype(dtype))
    with LineMode():
        ev = interpreter.run()
    return ev, LineMap(lines, keep)


class LineMap(dict[int, int]):
    """id(grad_fn) -> program line; holds the grad_fns so their ids stay theirs."""

    def __init__(self, lines: dict[int, int], alive: list[Any]) -> None:
        super().__init__(lines)
        self.alive = alive


def line_of(graph: Graph, node_id: str, outputs: list[Any], lines: dict[int, int]) -> int | None:
    """The program line of `node_id`, or of the nearest op above it that has one.

    The graph's op and leaf ids follow the tracer's breadth-first walk, so the
    same walk here finds the node's grad_fn. Ops made inside a library call
    (cross_entropy's log_softmax) take the line of the call.
    """
    walked = [n.id for n in graph.nodes if n.kind in (NodeKind.OP, NodeKind.LEAF)]
    if node_id not in walked:
        return None
    want = walked.index(node_id)
    order: list[Any] = []
    parent: dict[int, Any] = {}
    seen: set[int] = set()
    queue: deque[Any] = deque()
    for t in outputs:
        fn = getattr(t, "grad_fn", None)
        if fn is not None and id(fn) not in seen:
            seen.add(id(fn))
            order.append(fn)
            queue.append(fn)
    while queue and len(order) <= want:
        fn = queue.popleft()
        for child, _ in fn.next_functions:
            if child is not None and id(child) not in seen:
                seen.add(id(child))
                parent[id(child)] = fn
                order.append(child)
                queue.append(child)
    if want >= len(order):
        return None
    fn: Any = order[want]
    while fn is not None:
        if id(fn) in lines:
            return lines[id(fn)]
        fn = parent.get(id(fn))
    return None
