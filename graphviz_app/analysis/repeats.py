"""Find a block of ops repeated over the same parameters: forward passes a graph still holds."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from ..model import EdgeKind, Graph, NodeKind, human_bytes

__all__ = ["Repeat", "find_repeats"]


@dataclass(frozen=True, slots=True)
class Repeat:
    """`count` copies of one `ops`-op block, each reading the same `params`.

    `roots` are the block copies' top op ids; `saved_bytes` what the copies
    keep saved for backward, all together.
    """

    count: int
    ops: int
    params: tuple[str, ...]
    roots: tuple[str, ...]
    saved_bytes: int

    def __str__(self) -> str:
        names = ", ".join(self.params) if self.params else "the same leaf tensors"
        return (
            f"this graph repeats the same {self.ops}-op block {self.count} times over the same "
            f"parameters ({names}), keeping {human_bytes(self.saved_bytes)} saved for backward: "
            "it holds that many forward passes. If they are separate training steps, accumulate "
            "`loss.item()` (a number) instead of `loss`, so each step's graph can be freed"
        )


def _signatures(graph: Graph) -> dict[str, int]:
    """A structural id per op/leaf: the same op over the same inputs and leaves gets the same id.

    Leaves are themselves (the same parameter); ops are their name, attributes
    and their inputs' ids by slot. Computed inputs-first with Kahn's algorithm.
    """
    inputs: dict[str, list[tuple[int, str]]] = {n.id: [] for n in graph.nodes}
    consumers: dict[str, list[str]] = {n.id: [] for n in graph.nodes}
    for e in graph.edges:
        if e.kind is EdgeKind.DATA:
            inputs[e.dst].append((e.slot, e.src))
            consumers[e.src].append(e.dst)
    kinds = {n.id: n for n in graph.nodes}
    waiting = {nid: len(ins) for nid, ins in inputs.items()}
    ready = deque(nid for nid, count in waiting.items() if count == 0)
    interned: dict[tuple[object, ...], int] = {}
    sig: dict[str, int] = {}
    while ready:
        nid = ready.popleft()
        node = kinds[nid]
        if node.kind is NodeKind.LEAF:
            key: tuple[object, ...] = ("leaf", nid)
        else:
            key = (node.name, node.attrs, tuple(sig[src] for _, src in sorted(inputs[nid])))
        sig[nid] = interned.setdefault(key, len(interned))
        for parent in consumers[nid]:
            waiting[parent] -= 1
            if waiting[parent] == 0:
                ready.append(parent)
    return sig


def _block(graph: Graph, root: str, inputs: dict[str, list[str]]) -> tuple[set[str], set[str]]:
    """The ops under `root` and the leaves they read."""
    ops: set[str] = set()
    leaves: set[str] = set()
    queue = deque([root])
    while queue:
        nid = queue.popleft()
        if nid in ops or nid in leaves:
            continue
        if graph.node(nid).kind is NodeKind.LEAF:
            leaves.add(nid)
            continue
        ops.add(nid)
        queue.extend(inputs[nid])
    return ops, leaves


def find_repeats(graph: Graph, *, min_count: int = 2) -> Repeat | None:
    """The largest op block that occurs `min_count` or more times over the same leaves, or None."""
    sig = _signatures(graph)
    roots_of: dict[int, list[str]] = {}
    for n in graph.nodes:
        if n.kind is NodeKind.OP and n.id in sig:
            roots_of.setdefault(sig[n.id], []).append(n.id)
    inputs: dict[str, list[str]] = {n.id: [] for n in graph.nodes}
    for e in graph.edges:
        if e.kind is EdgeKind.DATA:
            inputs[e.dst].append(e.src)
    best: tuple[int, list[str], set[str]] | None = None  # (ops, roots, leaves)
    for roots in roots_of.values():
        if len(roots) < min_count:
            continue
        block, leaves = _block(graph, roots[0], inputs)
        if leaves and (best is None or len(block) > best[0]):
            best = (len(block), roots, leaves)
    if best is None:
        return None
    size, roots, leaves = best
    inside = {nid for r in roots for nid in _block(graph, r, inputs)[0]}
    total, storages = 0, set()
    for e in graph.edges:
        t = graph.node(e.src).tensor if e.kind is EdgeKind.SAVED and e.dst in inside else None
        # one storage saved by every copy (the weight) counts once, as in Graph.summary()
        if t is not None and not t.freed and (t.storage is None or t.storage not in storages):
            storages.add(t.storage)
            total += t.bytes
    names = tuple(sorted(graph.node(leaf).name or leaf for leaf in leaves))
    return Repeat(count=len(roots), ops=size, params=names, roots=tuple(roots), saved_bytes=total)
