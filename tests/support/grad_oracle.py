"""The reference answer: per-node hooks registered by the test itself, stats in float64."""

from __future__ import annotations

import math
from collections import deque
from typing import Any

import torch

from graphviz_app.model import GradInfo

__all__ = ["walk_fns", "reference_gradients", "reference_info"]


def walk_fns(outputs: list[torch.Tensor]) -> list[Any]:
    """The autograd nodes behind `outputs`, breadth-first in slot order (the tracer's order)."""
    order: list[Any] = []
    seen: set[int] = set()
    queue: deque[Any] = deque()
    for t in outputs:
        if id(t.grad_fn) not in seen:
            seen.add(id(t.grad_fn))
            order.append(t.grad_fn)
            queue.append(t.grad_fn)
    while queue:
        fn = queue.popleft()
        for child, _ in fn.next_functions:
            if child is not None and id(child) not in seen:
                seen.add(id(child))
                order.append(child)
                queue.append(child)
    return order


def reference_gradients(
    outputs: list[torch.Tensor], fns: list[Any]
) -> tuple[dict[int, Any], dict[tuple[int, int], Any]]:
    """Gradient w.r.t. each node's output (by position in `fns`) and along each (node, slot)."""
    node_grads: dict[int, torch.Tensor] = {}
    edge_grads: dict[tuple[int, int], torch.Tensor] = {}
    handles = []
    leaves = [(i, fn.variable) for i, fn in enumerate(fns) if hasattr(fn, "variable")]

    def hook_for(i: int) -> Any:
        def hook(grad_inputs: tuple[Any, ...], grad_outputs: tuple[Any, ...]) -> None:
            if grad_outputs and grad_outputs[0] is not None:
                node_grads[i] = grad_outputs[0].detach().clone()
            for slot, g in enumerate(grad_inputs):
                if g is not None:
                    edge_grads[(i, slot)] = g.detach().clone()
        return hook

    for i, fn in enumerate(fns):
        if not hasattr(fn, "variable"):
            handles.append(fn.register_hook(hook_for(i)))
    try:
        got = torch.autograd.grad(
            outputs, [t for _, t in leaves], [torch.ones_like(t) for t in outputs],
            retain_graph=True, allow_unused=True,
        )
    finally:
        for h in handles:
            h.remove()
    for (i, _), g in zip(leaves, got, strict=True):
        if g is not None:
            node_grads[i] = g
    return node_grads, edge_grads


def reference_info(g: torch.Tensor) -> GradInfo:
    """GradInfo computed element by element in Python floats, independently of gradflow."""
    flat = [float(v) for v in g.detach().reshape(-1).double().tolist()]
    finite = [abs(v) for v in flat if math.isfinite(v)]
    nan = sum(1 for v in flat if math.isnan(v))
    values = None
    if len(flat) <= 16:
        values = tuple("nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else v for v in flat)
    return GradInfo(
        numel=len(flat),
        norm=math.sqrt(math.fsum(v * v for v in finite)),
        max_abs=max(finite, default=0.0),
        mean_abs=math.fsum(finite) / len(finite) if finite else 0.0,
        nan=nan,
        inf=len(flat) - len(finite) - nan,
        zero_fraction=sum(1 for v in flat if v == 0) / len(flat) if flat else 0.0,
        values=values,
    )
