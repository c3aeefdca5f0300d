"""Which module each node belongs to, and the tree of module names (shared by the module analyses)."""

from __future__ import annotations

import functools
from collections.abc import Iterable

from ..model import EdgeKind, Graph, Node, NodeKind, TensorInfo

__all__ = [
    "node_modules", "ancestors", "module_depth", "module_names", "module_types", "saved_bytes", "leaf_storages",
    "held_bytes",
]


def node_modules(graph: Graph) -> dict[str, str | None]:
    """Node id -> qualified module name (None: outside any module).

    A saved tensor belongs to the module of the op that keeps it: the tracer
    leaves `Node.module` unset on saved tensors, but their memory is that op's.
    """
    found = {n.id: n.module for n in graph.nodes}
    kinds = {n.id: n.kind for n in graph.nodes}
    for e in graph.edges:
        if e.kind is EdgeKind.SAVED and kinds.get(e.src) is NodeKind.SAVED and found.get(e.src) is None:
            found[e.src] = found.get(e.dst)
    return found


@functools.lru_cache(maxsize=65_536)
def ancestors(name: str) -> tuple[str, ...]:
    """The module and its parents, the root first (cached: a network has few module names).

    >>> ancestors("layers.0.linear")
    ('', 'layers', 'layers.0', 'layers.0.linear')
    """
    if not name:
        return ("",)
    parts = name.split(".")
    return ("",) + tuple(".".join(parts[: i + 1]) for i in range(len(parts)))


def module_depth(name: str) -> int:
    """0 for the root module, 1 for its direct children, and so on.

    >>> module_depth(""), module_depth("layers"), module_depth("layers.0")
    (0, 1, 2)
    """
    return 0 if not name else name.count(".") + 1


def module_names(graph: Graph, modules_of: dict[str, str | None]) -> list[str]:
    """Every module of the graph with its parents: `Graph.modules` order, then as first met."""
    order: dict[str, None] = {}
    for m in graph.modules:
        for a in ancestors(m.name):
            order.setdefault(a, None)
    for n in graph.nodes:
        name = modules_of.get(n.id)
        if name is not None and name not in order:
            for a in ancestors(name):
                order.setdefault(a, None)
    return list(order)


def module_types(graph: Graph) -> dict[str, str]:
    """Module name -> class name, as recorded (empty when unknown)."""
    return {m.name: m.type for m in graph.modules}


def leaf_storages(graph: Graph) -> frozenset[str]:
    """The storages of the graph's leaf tensors (parameters, inputs that require grad)."""
    return frozenset(n.tensor.storage for n in graph.nodes
                     if n.kind is NodeKind.LEAF and n.tensor is not None and n.tensor.storage)


def held_bytes(tensor: TensorInfo) -> int:
    """The bytes a tensor keeps alive: its whole storage (a view holds all of it), else its own size.

    >>> from graphviz_app.model import TensorInfo
    >>> q = TensorInfo("q", (4, 8), "float32", "cpu", 32, 128, False, storage="s0", storage_bytes=384)
    >>> held_bytes(q)
    384
    """
    whole = tensor.storage_bytes
    return tensor.bytes if whole is None else whole


def saved_bytes(nodes: Iterable[Node], *, skip: frozenset[str] = frozenset()) -> int:
    """Bytes of the live saved tensors among `nodes`, each storage counted once and whole.

    A tensor saved through a view (q split from one qkv projection, a gate
    chunked from a GRU's gates) keeps its whole storage alive, so that is what
    counts. Storages in `skip` do not count: with `leaf_storages(graph)` this is
    the activation memory the graph holds, not the weights it saves (they exist anyway).
    """
    storages: dict[str, int] = {}
    for n in nodes:
        t = n.tensor
        if n.kind is NodeKind.SAVED and t is not None and not t.freed and t.storage not in skip:
            key = t.storage or n.id
            storages[key] = max(storages.get(key, 0), held_bytes(t))
    return sum(storages.values())
