"""Find a block of ops repeated over the same parameters: forward passes a graph still holds."""

from __future__ import annotations

import math
from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import dataclass

from ..model import EdgeKind, Graph, Node, NodeKind, human_bytes
from .module_tree import ancestors, leaf_storages, module_types, saved_bytes

__all__ = ["Repeat", "find_repeats", "SHOWN_PARAMS"]

SHOWN_PARAMS = 3  # parameters the message names; `Repeat.params` has them all


@dataclass(frozen=True, slots=True)
class Repeat:
    """`count` copies of one `ops`-op block, each reading the same `params`.

    `roots` are the block copies' top op ids; `saved_bytes` what the copies
    keep saved for backward, all together (each storage once and whole,
    parameters left out, as in `Graph.summary()`: never more than the graph
    holds); `module` the innermost module holding every op of a copy ("" the
    root module, None when the graph has no module information) and
    `module_type` its class name.
    """

    count: int
    ops: int
    params: tuple[str, ...]
    roots: tuple[str, ...]
    saved_bytes: int
    module: str | None = None
    module_type: str = ""

    def __str__(self) -> str:
        shown = ", ".join(self.params[:SHOWN_PARAMS]) if self.params else "the same leaf tensors"
        if len(self.params) > SHOWN_PARAMS:
            shown += f" and {len(self.params) - SHOWN_PARAMS} more"
        where = ""
        if self.module is not None:
            kind = f" ({self.module_type})" if self.module_type else ""
            where = f" in the whole model{kind}" if self.module == "" else f" in module {self.module}{kind}"
        return (
            f"this graph repeats the same {self.ops}-op block{where} {self.count} times over the same "
            f"parameters ({shown}), keeping {human_bytes(self.saved_bytes)} saved for backward: "
            "it holds that many forward passes. If they are separate training steps, accumulate "
            "`loss.item()` (a number) instead of `loss`, so each step's graph can be freed"
        )


class _Walk:
    """The graph's data edges by node, its nodes by id, and each node's structural signature."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.by_id = {n.id: n for n in graph.nodes}
        self.inputs: dict[str, list[tuple[int, str]]] = {n.id: [] for n in graph.nodes}
        self.consumers: dict[str, list[str]] = {n.id: [] for n in graph.nodes}
        self.saved: dict[str, list[str]] = {}
        for e in graph.edges:
            if e.kind is EdgeKind.DATA:
                self.inputs[e.dst].append((e.slot, e.src))
                self.consumers[e.src].append(e.dst)
            elif e.kind is EdgeKind.SAVED:
                self.saved.setdefault(e.dst, []).append(e.src)
        self.sig, self.order = self._signatures()

    def _signatures(self) -> tuple[dict[str, int], dict[str, int]]:
        """A structural id per op/leaf, and each node's place in inputs-first order.

        Leaves are themselves (the same parameter); ops are their name,
        attributes and their inputs' ids by slot, so two ops with one id
        compute the same thing from the same leaves. Kahn's algorithm.
        """
        waiting = {nid: len(ins) for nid, ins in self.inputs.items()}
        ready = deque(nid for nid, count in waiting.items() if count == 0)
        interned: dict[tuple[object, ...], int] = {}
        sig: dict[str, int] = {}
        order: dict[str, int] = {}
        while ready:
            nid = ready.popleft()
            node = self.by_id[nid]
            if node.kind is NodeKind.LEAF:
                key: tuple[object, ...] = ("leaf", nid)
            else:
                key = (node.name, node.attrs, tuple(sig[src] for _, src in sorted(self.inputs[nid])))
            sig[nid] = interned.setdefault(key, len(interned))
            order[nid] = len(order)
            for parent in self.consumers[nid]:
                waiting[parent] -= 1
                if waiting[parent] == 0:
                    ready.append(parent)
        return sig, order

    def block(self, root: str) -> set[str]:
        """The ops under `root` (itself included), down to the leaves."""
        ops: set[str] = set()
        queue = deque([root])
        while queue:
            nid = queue.popleft()
            if nid in ops or self.by_id[nid].kind is NodeKind.LEAF:
                continue
            ops.add(nid)
            queue.extend(src for _, src in self.inputs[nid])
        return ops

    def leaves_read(self, ops: set[str]) -> set[str]:
        return {src for nid in ops for _, src in self.inputs[nid] if self.by_id[src].kind is NodeKind.LEAF}


def find_repeats(graph: Graph, *, min_count: int = 2) -> Repeat | None:
    """The largest block of ops the graph holds `min_count` or more separate copies of, or None.

    A copy is a forward pass held apart: the copies compute the same ops from
    the same parameters, none feeds another, and what the graph does above
    them is only to combine them (`total_loss += loss`, a mean of the steps).
    A single forward pass that uses its parameters twice (weight tying, one
    layer applied twice, q and k from one projection, a reshape of one input
    repeated per projection) is not reported: its repeats feed the rest of
    the model or each other. Nor is one loss over several passes of one
    network (a Siamese pair, a triplet, two views of one input): each copy
    ends in a loss (one number) when steps are held, in a tensor of features
    when one loss compares the passes.

    >>> from graphviz_app.model import Edge, Graph, Node, NodeKind
    >>> w = Node("w", NodeKind.LEAF, "weight")
    >>> ops = (("m", "MulBackward0"), ("s", "SumBackward0"))
    >>> steps = [Node(f"{k}{i}", NodeKind.OP, op) for i in range(3) for k, op in ops]
    >>> total = [Node("a0", NodeKind.OP, "AddBackward0"), Node("a1", NodeKind.OP, "AddBackward0")]
    >>> edges = [e for i in range(3) for e in (Edge("w", f"m{i}"), Edge(f"m{i}", f"s{i}"))] + [
    ...     Edge("s0", "a0"), Edge("s1", "a0", slot=1), Edge("a0", "a1"), Edge("s2", "a1", slot=1)]
    >>> find_repeats(Graph((w, *steps, *total), tuple(edges))).count
    3
    """
    walk = _Walk(graph)
    groups: dict[int, list[str]] = {}
    for n in graph.nodes:
        if n.kind is NodeKind.OP and n.id in walk.sig:
            groups.setdefault(walk.sig[n.id], []).append(n.id)
    candidates = sorted((roots for roots in groups.values() if len(roots) >= min_count),
                        key=lambda roots: -max(walk.order[r] for r in roots))
    all_ops = sum(1 for n in graph.nodes if n.kind is NodeKind.OP)
    covered: set[str] = set()
    best: tuple[list[str], list[set[str]]] | None = None
    for roots in candidates:  # the highest first: a copy's inner repeats come after it
        if roots[0] in covered:
            continue
        blocks = [walk.block(r) for r in roots]
        if _separate_copies(walk, roots, blocks, all_ops):
            covered.update(*blocks)
            if best is None or len(blocks[0]) > len(best[1][0]):
                best = (roots, blocks)
    return None if best is None else _describe(graph, walk, *best)


def _separate_copies(walk: _Walk, roots: list[str], blocks: list[set[str]], all_ops: int) -> bool:
    """Whether the blocks are copies held apart: disjoint but for a common part, reading parameters, combined on top.

    Ops in more than one block must be in all of them (something computed
    once and given to every copy); what each copy has alone must be as big
    as the others' and read a parameter; and the graph above the copies is
    at most a few ops per copy (the sum or mean that combines them) and
    smaller than the copies (a weight's transpose used twice in a small
    model is not two forward passes).
    """
    times = Counter(op for block in blocks for op in block)
    if any(c != len(blocks) for c in times.values() if c > 1):
        return False  # one copy feeds another: a layer applied again, a sequence step
    own = [{op for op in block if times[op] == 1} for block in blocks]
    if not own[0] or any(len(o) != len(own[0]) for o in own) or not walk.leaves_read(own[0]):
        return False  # the same op on one shared input (a reshape per projection): one pass
    if not all(_one_number(walk.by_id[root]) for root in roots):
        return False  # passes whose features one loss compares (Siamese, triplet): one step
    above = all_ops - len(times)
    return above <= 3 * len(blocks) + 3 and 2 * above <= len(times)


def _one_number(op: Node) -> bool:
    """Whether the op's forward result is one number, as a step's loss is (True when its shape is unknown)."""
    if op.tensor is None:
        return True
    return math.prod(op.tensor.shape) == 1


def _describe(graph: Graph, walk: _Walk, roots: list[str], blocks: list[set[str]]) -> Repeat:
    inside = set().union(*blocks)
    saved = (walk.by_id[s] for op in inside for s in walk.saved.get(op, ()))
    held = saved_bytes(saved, skip=leaf_storages(graph))
    leaves = walk.leaves_read(blocks[0])
    names = tuple(sorted(walk.by_id[leaf].name or leaf for leaf in leaves))
    module = _common_module(walk.by_id[op] for op in blocks[0])
    return Repeat(
        count=len(roots), ops=len(blocks[0]), params=names, roots=tuple(roots), saved_bytes=held,
        module=module, module_type=module_types(graph).get(module, "") if module is not None else "",
    )


def _common_module(ops: Iterable[Node]) -> str | None:
    """The innermost module around every op that has one (None: no op has one)."""
    common: tuple[str, ...] | None = None
    for node in ops:
        if node.module is None:
            continue
        path = ancestors(node.module)
        if common is None:
            common = path
        else:
            i = 0
            while i < len(common) and i < len(path) and common[i] == path[i]:
                i += 1
            common = common[:i]
    return None if not common else common[-1]
