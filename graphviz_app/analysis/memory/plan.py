"""What a backward pass over a graph will do, read from the graph once: who sends gradients where, who saves what."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from ...model import FORWARD_PEAK_ATTR, PACKED_BY_HOOK, STATE_ATTR, EdgeKind, Graph, Node, NodeKind
from ...model.annotations import CHECKPOINT_KEPT_ATTR, RECOMPUTE_BLOCK_ATTR, RECOMPUTED_BYTES_ATTR
from .op_bytes import RECORDED_ATTRS, OpBytesRead, read_op_attrs
from .rules import SAME_FIRST, SAME_WHEN_SAME_SIZE, VIEWS

__all__ = ["BackwardPlan", "GraphFacts", "plan_backward", "with_forward_peak", "RECOMPUTE_BLOCK_ATTR",
           "RECOMPUTED_BYTES_ATTR", "CHECKPOINT_KEPT_ATTR", "MAKES_VIEW", "MAKES_SAME", "MAKES_SAME_FIRST",
           "MAKES_BY_NAME", "LEAF_RANK", "LEAVES_BELOW"]

# Ops of unknown recency run after those of known recency, in walk order.
_UNKNOWN_RECENCY = 1 << 62
# How an op makes its inputs' gradients (`BackwardPlan.makes`; rules.py): absent, a new tensor for each.
MAKES_VIEW, MAKES_SAME, MAKES_SAME_FIRST = 1, 2, 3
# Op name -> how it makes them, where the rules say (a name in two rules: the first of VIEWS, SAME_WHEN_SAME_SIZE).
MAKES_BY_NAME: dict[str, int] = {**dict.fromkeys(SAME_FIRST, MAKES_SAME_FIRST),
                                 **dict.fromkeys(SAME_WHEN_SAME_SIZE, MAKES_SAME), **dict.fromkeys(VIEWS, MAKES_VIEW)}
# Below every op's rank: leaves (AccumulateGrad) run first (`BackwardPlan.ranks`). An op's rank is
# `recency * (len(nodes) + 1) + its number`, a leaf's `LEAF_RANK + its number` (below `LEAVES_BELOW`).
LEAF_RANK = -(1 << 100)
LEAVES_BELOW = LEAF_RANK // 2


@dataclass(slots=True)
class GraphFacts:
    """What the timeline's notes say about a graph, counted while its nodes are read: ops, saved-tensor nodes, those
    backward had freed when traced (`freed`) and, of them, those a saved-tensor hook packed (`packed`); the ops of
    reentrant checkpoints (`reentrant`); whether some op has no recency."""

    ops: int = 0
    saved: int = 0
    freed: int = 0
    packed: int = 0
    reentrant: list[str] = field(default_factory=list)
    unknown_recency: bool = False


@dataclass(slots=True)
class BackwardPlan:
    """The facts a replay of backward needs.

    Nodes are numbered by their place in the graph: node `i` is `node_at[i]`, named `ids[i]` (`index[id]` is `i`,
    `nodes[id]` the node). The per-node tables are lists indexed by that number (a list index is a fifth of a
    string-keyed look-up in a table of 100,000s, and the replay makes a dozen per op).
    `sends[n]` lists (target, output_nr, slot) for every gradient node `n`
    sends (one per data edge into it; None: none); `deps[t]` counts the gradients `t`
    waits for before it runs; `roots` lists (op, output_nr, grad bytes,
    grad storage bytes) for the gradient each output starts backward with; `reachable[n]` whether backward runs
    op or leaf `n`.
    `storage_bytes` and `savers` describe the saved storages that count (not
    parameters, buffers, inputs or leaves), by storage key; `saved_by[n]` the keys op `n` saved (None: none);
    `results` the (op, storage) pairs
    where an op saves its own output (`result`), not one of its inputs;
    `outputs` the storages the user holds, each with the output node (id) that names it, and `output_op` each output
    node's op (ids).
    `recomputed[n]` lists (key, bytes) of the saved tensors non-reentrant checkpointing recomputes
    for op `n`; `block_of[n]` its block, `block_savers[b]` the ops of block `b` that have some,
    `block_kept[b]` the bytes of inputs only block `b`'s checkpoint keeps. `forward_peak` is the forward's
    own peak the run that made the graph left on its roots (`with_forward_peak`), None when it left none.
    By node id, as recorded on the graph: `temporaries[id]` the bytes op's backward makes and frees inside beyond
    what it returns, `nested[id]` the bytes a reentrant checkpoint's nested backward leaves (its block's `.grad`),
    both as the step ran, and of them `nested_leaves[id]` the (leaf id, bytes) of the `.grad` it made for leaves of
    this graph (used outside too); `reentrant_keeps[id]` what a reentrant checkpoint keeps of its block's other
    arguments for the whole step.
    `ranks[n]` is the engine's order among ready nodes as one int (ops and leaves; a leaf's is negative: leaves
    (AccumulateGrad) first, then the newest op), read with the nodes in one pass; it names its node (`LEAF_RANK`);
    `makes[n]` says how op `n` makes its inputs' gradients when not as new tensors (0; MAKES_VIEW: views of the
    gradient it got; MAKES_SAME: that gradient itself where the sizes agree; MAKES_SAME_FIRST: so for its
    first input only); `sizes[n]` the bytes of op or leaf `n`'s (first) tensor, 0 when none; `facts` counts what
    the timeline's notes tell (`GraphFacts`).
    """

    nodes: dict[str, Node]
    index: dict[str, int]
    ids: list[str]
    node_at: Sequence[Node]
    sizes: list[int]
    ranks: list[int]
    makes: list[int]
    sends: list[list[tuple[int, int, int]] | None]
    deps: list[int]
    saved_by: list[list[str] | None]
    reachable: list[bool] = field(default_factory=list)
    roots: list[tuple[int, int, int, int]] = field(default_factory=list)
    storage_bytes: dict[str, int] = field(default_factory=dict)
    savers: dict[str, list[int]] = field(default_factory=dict)
    outputs: dict[str, str] = field(default_factory=dict)
    output_op: dict[str, str] = field(default_factory=dict)
    results: set[tuple[int, str]] = field(default_factory=set)
    recomputed: dict[int, list[tuple[str, int]]] = field(default_factory=dict)
    block_of: dict[int, str] = field(default_factory=dict)
    block_savers: dict[str, list[int]] = field(default_factory=dict)
    block_kept: dict[str, int] = field(default_factory=dict)
    forward_peak: int | None = None
    temporaries: dict[str, int] = field(default_factory=dict)
    nested: dict[str, int] = field(default_factory=dict)
    nested_leaves: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    reentrant_keeps: dict[str, int] = field(default_factory=dict)
    facts: GraphFacts = field(default_factory=lambda: GraphFacts())

    def output_bytes(self, node: int, output_nr: int) -> int:
        """The size of forward output `output_nr` of node `node`: the gradient sent to it has this size.

        Past the first output, the traced `Node.output_bytes`; without it, the first output's size.
        """
        if output_nr:
            several = self.node_at[node].output_bytes
            if several is not None and output_nr < len(several):
                return several[output_nr]
        return self.sizes[node]


def _counted_key(n: Node, skip: set[str]) -> tuple[str, int] | None:
    """(storage key, bytes) of a node's tensor when it counts towards the step's memory."""
    t = n.tensor
    if t is None or t.freed or t.given or (t.storage is not None and t.storage in skip):
        return None
    size = t.storage_bytes if t.storage_bytes is not None else t.bytes
    return (t.storage or n.id, size)


def plan_backward(graph: Graph, roots: Collection[str] | None = None) -> BackwardPlan:
    """Read `graph` into a BackwardPlan; `roots` are the output node ids backward starts from (default all)."""
    plan, outputs, skip, leaves = _read_nodes(graph)
    wanted = {n.id for n in outputs} if roots is None else set(roots)
    unknown = sorted(wanted - {n.id for n in outputs})
    if unknown:
        raise ValueError(f"roots must be output node ids of the graph; {', '.join(unknown)} are not "
                         f"(its outputs: {', '.join(n.id for n in outputs) or 'none'})")
    _read_edges(graph, plan, wanted, skip)
    _reach(plan, plan.facts.ops + leaves)
    peaks = [int(v) for n in outputs if n.id in wanted for k, v in n.attrs if k == FORWARD_PEAK_ATTR]
    plan.forward_peak = max(peaks) if peaks else None
    for n in outputs:
        counted = _counted_key(n, skip)
        if counted is not None:
            plan.outputs.setdefault(counted[0], n.id)
            plan.storage_bytes[counted[0]] = max(plan.storage_bytes.get(counted[0], 0), counted[1])
    return plan


def _read_nodes(graph: Graph) -> tuple[BackwardPlan, list[Node], set[str], int]:
    """The plan's per-node tables, its output nodes, the leaves' storages and the number of leaves, in one pass over
    the nodes (a graph of 100,000 nodes does not fit in the CPU's caches: each pass over it costs as much as the
    work done in it)."""
    count = len(graph.nodes)
    sizes, ranks, makes = [0] * count, [0] * count, [0] * count
    outputs: list[Node] = []
    skip: set[str] = set()
    reentrant: list[str] = []
    ops = leaves = saved_count = freed = packed = 0
    unknown_recency = False
    recorded = OpBytesRead()
    op, leaf, saved, output = NodeKind.OP, NodeKind.LEAF, NodeKind.SAVED, NodeKind.OUTPUT
    packed_state = (STATE_ATTR, PACKED_BY_HOOK)
    makes_by_name = MAKES_BY_NAME
    step = count + 1
    ids = [n.id for n in graph.nodes]
    nodes = dict(zip(ids, graph.nodes, strict=True))  # built in C: half the cost of two stores a node in a loop
    index = dict(zip(ids, range(count), strict=True))
    recorded_names = RECORDED_ATTRS
    for i, n in enumerate(graph.nodes):
        kind, t = n.kind, n.tensor
        if kind is op:
            ops += 1
            if t is not None:
                sizes[i] = t.bytes
            recency = n.recency
            if recency is None:
                recency = _UNKNOWN_RECENCY
                unknown_recency = True
            ranks[i] = recency * step + i
            for key, _ in n.attrs:  # most ops' attrs are their saved arguments: no call for them
                if key in recorded_names:
                    read_op_attrs(n, recorded)
                    break
            name = n.name
            made = makes_by_name.get(name)
            if made is not None:
                makes[i] = made
            elif name == "CheckpointFunctionBackward":
                reentrant.append(ids[i])
        elif kind is saved:
            saved_count += 1
            if t is not None and t.freed:
                freed += 1
                if packed_state in n.attrs:
                    packed += 1
        elif kind is leaf:
            leaves += 1
            ranks[i] = LEAF_RANK + i
            if t is not None:
                sizes[i] = t.bytes
                if t.storage is not None:
                    skip.add(t.storage)
        elif kind is output:
            outputs.append(n)
    facts = GraphFacts(ops, saved_count, freed, packed, reentrant, unknown_recency)
    plan = BackwardPlan(nodes, index, ids, graph.nodes, sizes, ranks, makes, [None] * count, [0] * count,
                        [None] * count, temporaries=recorded.temporaries, nested=recorded.nested,
                        nested_leaves=recorded.nested_leaves, reentrant_keeps=recorded.keeps, facts=facts)
    return plan, outputs, skip, leaves


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
    nodes, index, node_at = plan.nodes, plan.index, plan.node_at
    saved_kind, data_kind = EdgeKind.SAVED, EdgeKind.DATA
    saved_node, output_node, op_node = NodeKind.SAVED, NodeKind.OUTPUT, NodeKind.OP
    senders = (NodeKind.OP, NodeKind.LEAF)
    storage_bytes, savers_of, saved_by, sends, deps = (plan.storage_bytes, plan.savers, plan.saved_by, plan.sends,
                                                       plan.deps)
    for e in graph.edges:
        kind = e.kind
        if kind is saved_kind:
            src = nodes[e.src]
            if src.attrs and _recomputed(plan, src, index[e.dst]):
                continue
            t = src.tensor  # as _counted_key, written out: one saved edge per saved tensor
            if src.kind is not saved_node or t is None or t.freed or t.given or (
                    t.storage is not None and t.storage in skip):
                continue
            key = t.storage or src.id
            size = t.storage_bytes if t.storage_bytes is not None else t.bytes
            if storage_bytes.get(key, -1) < size:
                storage_bytes[key] = size
            dst = index[e.dst]
            keys = saved_by[dst]
            # An op saving one storage twice (x * x) releases it once: told by the op's own few keys (a storage
            # may have 100,000s of savers)
            if keys is None or key not in keys:
                if keys is None:
                    saved_by[dst] = [key]
                else:
                    keys.append(key)
                savers = savers_of.get(key)
                if savers is None:
                    savers_of[key] = [dst]
                else:
                    savers.append(dst)
            if src.name.startswith("result"):
                plan.results.add((dst, key))
        elif kind is data_kind:
            sender, dst = index[e.src], index[e.dst]
            src_kind, dst_kind = node_at[sender].kind, node_at[dst].kind
            if dst_kind is op_node:
                if src_kind in senders:
                    found = sends[dst]
                    if found is None:
                        sends[dst] = [(sender, e.output_nr, e.slot)]
                    else:
                        found.append((sender, e.output_nr, e.slot))
                    deps[sender] += 1  # from every sender (`_reach` may count again)
            elif dst_kind is output_node:
                plan.output_op[e.dst] = e.src
                if e.dst in wanted and src_kind is op_node:
                    t = node_at[dst].tensor
                    size = t.bytes if t is not None else 0
                    item = size // t.numel if t is not None and t.numel else size
                    plan.roots.append((sender, e.output_nr, size, item))


def _recomputed(plan: BackwardPlan, saved: Node, saver: int) -> bool:
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


def _reach(plan: BackwardPlan, ranked: int) -> None:
    """Mark the nodes backward runs from the roots, and count the gradients each waits for (from the nodes it runs).

    `_read_edges` counted every sender's gradients: when every op and leaf (`ranked` of them) but the roots waits
    for one, backward runs them all (an autograd graph has no cycle: following senders back from any node ends at a
    root), and those counts stand. Otherwise the walk from the roots counts again.
    """
    roots = list(dict.fromkeys(op for op, _, _, _ in plan.roots))
    deps, sends, count = plan.deps, plan.sends, len(plan.deps)
    waiting = count - deps.count(0)  # only ops and leaves are counted: they alone send
    if ranked - waiting == sum(1 for r in roots if not deps[r]):  # those waiting for none are roots
        plan.reachable = [True] * count  # every op and leaf (what it says of the other nodes is never read)
        return
    plan.deps = deps = [0] * count
    plan.reachable = reachable = [False] * count
    for r in roots:
        reachable[r] = True
    todo = roots
    pop, push, none = todo.pop, todo.append, ()
    while todo:  # the order nodes are reached in does not matter: only whether, and the counts
        for target, _, _ in sends[pop()] or none:
            waits = deps[target]
            deps[target] = waits + 1
            if not waits and not reachable[target]:
                reachable[target] = True
                push(target)
