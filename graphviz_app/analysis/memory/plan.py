"""What a backward pass over a graph will do, read from the graph once: who sends gradients where, who saves what."""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Collection
from dataclasses import dataclass, field

from ...model import FORWARD_PEAK_ATTR, EdgeKind, Graph, Node, NodeKind
from .op_bytes import read_op_bytes

__all__ = ["BackwardPlan", "plan_backward", "with_forward_peak", "RECOMPUTE_BLOCK_ATTR", "RECOMPUTED_BYTES_ATTR",
           "CHECKPOINT_KEPT_ATTR"]

# On a saved tensor non-reentrant checkpointing packed: its checkpointed block (a number) and the
# bytes the block's recompute makes for it (0: a parameter or block input, saved again uncopied).
RECOMPUTE_BLOCK_ATTR = "checkpoint block"
RECOMPUTED_BYTES_ATTR = "recomputed bytes"
# On one packed saved tensor of a block: the bytes of the block's inputs only its checkpoint keeps (until
# the block's backward is done).
CHECKPOINT_KEPT_ATTR = "checkpoint keeps"

# Ops of unknown recency run after those of known recency, in walk order.
_UNKNOWN_RECENCY = 1 << 62


@dataclass(slots=True)
class BackwardPlan:
    """The facts a replay of backward needs, keyed by node id.

    `sends[n]` lists (target, output_nr, slot) for every gradient node `n`
    sends (one per data edge into it); `deps[t]` counts the gradients `t`
    waits for before it runs; `roots` lists (op, output_nr, grad bytes,
    grad storage bytes) for the gradient each output starts backward with.
    `storage_bytes` and `savers` describe the saved storages that count (not
    parameters, buffers, inputs or leaves); `results` the (op, storage) pairs
    where an op saves its own output (`result`), not one of its inputs;
    `outputs` the storages the user holds, each with the output node that names it.
    `recomputed[n]` lists (key, bytes) of the saved tensors non-reentrant checkpointing recomputes
    for op `n`; `block_of[n]` its block, `block_savers[b]` the ops of block `b` that have some,
    `block_kept[b]` the bytes of inputs only block `b`'s checkpoint keeps. `forward_peak` is the forward's
    own peak the run that made the graph left on its roots (`with_forward_peak`), None when it left none.
    `temporaries[n]` the bytes op `n`'s backward makes and frees inside beyond what it returns, `nested[n]`
    the bytes a reentrant checkpoint's nested backward leaves (its block's `.grad`), both as the step ran;
    `reentrant_keeps[n]` what a reentrant checkpoint keeps of its block's other arguments for the whole step.
    """

    nodes: dict[str, Node]
    index: dict[str, int]
    sends: dict[str, list[tuple[str, int, int]]] = field(default_factory=dict)
    deps: dict[str, int] = field(default_factory=dict)
    roots: list[tuple[str, int, int, int]] = field(default_factory=list)
    reachable: set[str] = field(default_factory=set)
    storage_bytes: dict[str, int] = field(default_factory=dict)
    savers: dict[str, list[str]] = field(default_factory=dict)
    saved_by: dict[str, list[str]] = field(default_factory=dict)
    outputs: dict[str, str] = field(default_factory=dict)
    output_op: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    sizes: dict[str, int] = field(default_factory=dict)
    results: set[tuple[str, str]] = field(default_factory=set)
    recomputed: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    block_of: dict[str, str] = field(default_factory=dict)
    block_savers: dict[str, list[str]] = field(default_factory=dict)
    block_kept: dict[str, int] = field(default_factory=dict)
    forward_peak: int | None = None
    temporaries: dict[str, int] = field(default_factory=dict)
    nested: dict[str, int] = field(default_factory=dict)
    reentrant_keeps: dict[str, int] = field(default_factory=dict)

    def priority(self, node_id: str) -> tuple[int, int, int]:
        """The engine's order among ready nodes: leaves (AccumulateGrad) first, then the newest op."""
        n = self.nodes[node_id]
        if n.kind is NodeKind.LEAF:
            return (0, 0, self.index[node_id])
        recency = n.recency if n.recency is not None else _UNKNOWN_RECENCY
        return (1, recency, self.index[node_id])

    def output_bytes(self, node_id: str, output_nr: int) -> int:
        """The size of forward output `output_nr` of a node: the gradient sent to it has this size.

        Past the first output, the traced `Node.output_bytes`; without it, the first output's size.
        """
        if output_nr:
            several = self.nodes[node_id].output_bytes
            if several is not None and output_nr < len(several):
                return several[output_nr]
        return self.sizes.get(node_id, 0)


def _counted_key(n: Node, skip: set[str]) -> tuple[str, int] | None:
    """(storage key, bytes) of a node's tensor when it counts towards the step's memory."""
    t = n.tensor
    if t is None or t.freed or t.given or (t.storage is not None and t.storage in skip):
        return None
    size = t.storage_bytes if t.storage_bytes is not None else t.bytes
    return (t.storage or n.id, size)


def plan_backward(graph: Graph, roots: Collection[str] | None = None) -> BackwardPlan:
    """Read `graph` into a BackwardPlan; `roots` are the output node ids backward starts from (default all)."""
    nodes = {n.id: n for n in graph.nodes}
    plan = BackwardPlan(nodes, {n.id: i for i, n in enumerate(graph.nodes)})
    plan.sizes = {n.id: n.tensor.bytes for n in graph.nodes
                  if n.tensor is not None and n.kind in (NodeKind.OP, NodeKind.LEAF)}
    outputs = [n for n in graph.nodes if n.kind is NodeKind.OUTPUT]
    wanted = {n.id for n in outputs} if roots is None else set(roots)
    unknown = sorted(wanted - {n.id for n in outputs})
    if unknown:
        raise ValueError(f"roots must be output node ids of the graph; {', '.join(unknown)} are not "
                         f"(its outputs: {', '.join(n.id for n in outputs) or 'none'})")
    skip = {n.tensor.storage for n in graph.nodes
            if n.kind is NodeKind.LEAF and n.tensor is not None and n.tensor.storage is not None}
    _read_edges(graph, plan, wanted, skip)
    plan.temporaries, plan.nested, plan.reentrant_keeps = read_op_bytes(graph.nodes)
    _reach(plan)
    peaks = [int(v) for n in outputs if n.id in wanted for k, v in n.attrs if k == FORWARD_PEAK_ATTR]
    plan.forward_peak = max(peaks) if peaks else None
    for n in outputs:
        counted = _counted_key(n, skip)
        if counted is not None:
            plan.outputs.setdefault(counted[0], n.id)
            plan.storage_bytes[counted[0]] = max(plan.storage_bytes.get(counted[0], 0), counted[1])
    return plan


def with_forward_peak(graph: Graph, roots: Collection[str], peak: int) -> Graph:
    """`graph` with the forward's own peak (bytes, counted as the step ran) on its root output nodes, so that it
    travels with the graph through `save` and `load` and `memory_timeline` of the loaded graph knows it.

    >>> from graphviz_app.model import Node, NodeKind
    >>> g = with_forward_peak(Graph((Node("n0", NodeKind.OUTPUT, "output"),), ()), ["n0"], 96)
    >>> g.nodes[0].attrs, plan_backward(g).forward_peak
    ((('forward peak bytes', '96'),), 96)
    """
    wanted = set(roots)
    nodes = tuple(
        dataclasses.replace(n, attrs=(*((k, v) for k, v in n.attrs if k != FORWARD_PEAK_ATTR),
                                      (FORWARD_PEAK_ATTR, str(peak))))
        if n.id in wanted and n.kind is NodeKind.OUTPUT else n for n in graph.nodes)
    return dataclasses.replace(graph, nodes=nodes)


def _read_edges(graph: Graph, plan: BackwardPlan, wanted: set[str], skip: set[str]) -> None:
    nodes = plan.nodes
    saved_kind, data_kind = EdgeKind.SAVED, EdgeKind.DATA
    saved_node, output_node, op_node = NodeKind.SAVED, NodeKind.OUTPUT, NodeKind.OP
    senders = (NodeKind.OP, NodeKind.LEAF)
    storage_bytes, savers_of, saved_by, sends = plan.storage_bytes, plan.savers, plan.saved_by, plan.sends
    for e in graph.edges:
        kind = e.kind
        src = nodes[e.src]
        if kind is saved_kind:
            if src.attrs and _recomputed(plan, src, e.dst):
                continue
            counted = _counted_key(src, skip) if src.kind is saved_node else None
            if counted is None:
                continue
            key, size = counted
            if storage_bytes.get(key, -1) < size:
                storage_bytes[key] = size
            savers = savers_of.get(key)
            if savers is None:
                savers = savers_of[key] = []
            if e.dst not in savers:  # an op saving one storage twice (x * x) releases it once
                savers.append(e.dst)
                saved_by.setdefault(e.dst, []).append(key)
            if src.name.startswith("result"):
                plan.results.add((e.dst, key))
        elif kind is data_kind:
            dst_kind = nodes[e.dst].kind
            if dst_kind is op_node:
                if src.kind in senders:
                    found = sends.get(e.dst)
                    if found is None:
                        sends[e.dst] = [(e.src, e.output_nr, e.slot)]
                    else:
                        found.append((e.src, e.output_nr, e.slot))
            elif dst_kind is output_node:
                plan.output_op[e.dst] = e.src
                if e.dst in wanted and src.kind is op_node:
                    t = nodes[e.dst].tensor
                    size = t.bytes if t is not None else 0
                    item = size // t.numel if t is not None and t.numel else size
                    plan.roots.append((e.src, e.output_nr, size, item))


def _recomputed(plan: BackwardPlan, saved: Node, saver: str) -> bool:
    """Record a saved tensor checkpointing recomputes (with its block and bytes known); whether it was one."""
    attrs = dict(saved.attrs)
    block, size = attrs.get(RECOMPUTE_BLOCK_ATTR), attrs.get(RECOMPUTED_BYTES_ATTR)
    if block is None or size is None:
        return False
    plan.recomputed.setdefault(saver, []).append((f"recompute:{saved.id}", int(size)))
    kept = attrs.get(CHECKPOINT_KEPT_ATTR)
    if kept is not None:
        plan.block_kept[block] = plan.block_kept.get(block, 0) + int(kept)
    if saver not in plan.block_of:
        plan.block_of[saver] = block
        plan.block_savers.setdefault(block, []).append(saver)
    return True


def _reach(plan: BackwardPlan) -> None:
    """Mark the nodes backward runs from the roots, and count the gradients each waits for."""
    todo = deque(dict.fromkeys(op for op, _, _, _ in plan.roots))
    plan.reachable.update(todo)
    while todo:
        node = todo.popleft()
        for target, _, _ in plan.sends.get(node, ()):
            plan.deps[target] = plan.deps.get(target, 0) + 1
            if target not in plan.reachable:
                plan.reachable.add(target)
                todo.append(target)
