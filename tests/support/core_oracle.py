"""Reference answers: the op names in torchviz's DOT and a plain walk of next_functions."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from typing import Any

import torch

from graphviz_app.model import EdgeKind, Graph, NodeKind

__all__ = [
    "torchviz_ops",
    "torchviz_saved_count",
    "ours_ops",
    "ours_op_edges",
    "torch_walk_ops",
    "tensors_in",
]

# One node statement of torchviz's DOT: `\t<id> [label=<label> <attrs>]`.
# Labels of tensor nodes hold real newlines, hence DOTALL on the quoted part.
_NODE = re.compile(r'^\t(\d+) \[label=("(?:[^"\\]|\\.)*"|[^\s\]]+)([^\]]*)\]$', re.M | re.S)
_EDGE = re.compile(r"^\t(\d+) -> (\d+)(?: \[([^\]]*)\])?$", re.M)


def _torchviz_nodes(source: str) -> dict[str, tuple[str, bool]]:
    """id -> (first label line, is a tensor node). Later statements win, as in Graphviz."""
    nodes: dict[str, tuple[str, bool]] = {}
    for node_id, label, rest in _NODE.findall(source):
        first = label.strip('"').split("\n")[0].split("\\n")[0]
        nodes[node_id] = (first, "fillcolor" in rest)  # tensors are lightblue/green/orange
    return nodes


def torchviz_ops(source: str) -> tuple[Counter[str], Counter[tuple[str, str]]]:
    """The op (backward function) names in torchviz's DOT, and op -> op edges by name."""
    nodes = _torchviz_nodes(source)
    ops = {i: name for i, (name, is_tensor) in nodes.items() if not is_tensor}
    edges = Counter(
        (ops[src], ops[dst]) for src, dst, _ in _EDGE.findall(source) if src in ops and dst in ops
    )
    return Counter(ops.values()), edges


def torchviz_saved_count(source: str) -> int:
    """How many saved tensors torchviz attached to ops (its undirected edges)."""
    return sum(1 for *_, attrs in _EDGE.findall(source) if "dir=none" in attrs)


def _op_name(node: Any) -> str:
    return "AccumulateGrad" if node.kind is NodeKind.LEAF else node.name


def ours_ops(graph: Graph) -> Counter[str]:
    """Our op names, plus one AccumulateGrad per leaf, as torchviz draws them."""
    return Counter(_op_name(n) for n in graph.nodes if n.kind in (NodeKind.OP, NodeKind.LEAF))


def ours_op_edges(graph: Graph) -> Counter[tuple[str, str]]:
    by_id = {n.id: n for n in graph.nodes}
    kinds = (NodeKind.OP, NodeKind.LEAF)
    return Counter(
        (_op_name(by_id[e.src]), _op_name(by_id[e.dst]))
        for e in graph.edges
        if e.kind is EdgeKind.DATA and by_id[e.src].kind in kinds and by_id[e.dst].kind in kinds
    )


def tensors_in(outputs: Any) -> Iterable[torch.Tensor]:
    if isinstance(outputs, torch.Tensor):
        yield outputs
    else:
        for o in outputs:
            yield from tensors_in(o)


def torch_walk_ops(outputs: Any) -> Counter[str]:
    """Op names found by walking grad_fn.next_functions with nothing but torch."""
    stack = [t.grad_fn for t in tensors_in(outputs) if t.grad_fn is not None]
    seen: list[Any] = []  # kept alive, so id() stays unique
    seen_ids: set[int] = set()
    while stack:
        fn = stack.pop()
        if id(fn) in seen_ids:
            continue
        seen_ids.add(id(fn))
        seen.append(fn)
        stack.extend(child for child, _ in fn.next_functions if child is not None)
    return Counter(type(fn).__name__ for fn in seen)
