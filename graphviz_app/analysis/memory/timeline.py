"""`memory_timeline(graph)`: the bytes a training step holds before and after every backward node, from its graph.

The order modelled is the one torch's engine uses on one device (CPU, or one GPU):
the ready node with the highest sequence number runs first, AccumulateGrad (whose
sequence number is the largest) as soon as its gradient is complete; a node is ready
once every gradient it waits for has arrived. A node's saved tensors are released when
it has run (unless `retain_graph`), its input buffer when it has consumed it. Where
torch differs: with several devices each device's nodes run on that device's own
thread, interleaved as the threads go; reentrant checkpointing runs a nested backward
inside the checkpointed node (its recompute is not in this graph). Non-reentrant
checkpointing is replayed when the graph says what its recompute makes (traced by
`measure`/`forecast`): the block's saved tensors are made again just before its first
backward node that needs one, and the inputs only the checkpoint keeps stay until the
block's backward is done.
"""

from __future__ import annotations

import gc
from collections.abc import Collection
from operator import attrgetter
from typing import Any

from ...model import Graph, Node, NodeKind
from ...model.annotations import TEMPORARIES_FOUND_ATTR
from .plan import BackwardPlan, plan_backward
from .records import HolderKind, MemoryTimeline, ModuleBytes
from .replay import EngineReplay

__all__ = ["memory_timeline"]


def memory_timeline(
    graph: Graph, *, retain_graph: bool = False, roots: Collection[str] | None = None,
    forward_peak_bytes: int | None = None, sums_in_place: bool = True,
) -> MemoryTimeline:
    """Replay backward over `graph` and count the bytes alive at every step.

    What counts (the **peak**'s definition): saved tensors, gradients waiting in
    input buffers or being made, the `.grad` of leaves made during the step, and
    the outputs the user still holds, each storage once (a view counts its whole
    base). What does not: parameters and leaf tensors, and tensors marked
    `TensorInfo.given` (buffers and inputs, known when traced by `trace_model`).

    Args:
        graph: a graph traced before `backward()` with its saved tensors.
        retain_graph: saved tensors stay alive after their node has run.
        roots: the output node ids backward starts from (default every output);
            each gets a one-element gradient, as `loss.backward()` or
            `out.sum().backward()` gives.
        forward_peak_bytes: the forward's own peak, counted as the step ran (`measure`,
            `forecast` pass it); the timeline's peak is the larger of it and the backward's.
        sums_in_place: torch sums a second gradient for one tensor into the first in place when nothing else
            holds it, as a plain step does; False for a step run under a TorchDispatchMode (PyTorch's
            MemTracker, FakeTensorMode, `measure` on CPU), where torch always sums into a new tensor.

    Returns:
        A MemoryTimeline: steps, the peak, who holds what at the peak.

    Raises:
        ValueError: a root is not an output node of the graph.

    >>> from graphviz_app.model import Edge, EdgeKind, Graph, Node, NodeKind, TensorInfo
    >>> y = TensorInfo(None, (4,), "float32", "cpu", 4, 16, True, storage="s0", storage_bytes=16)
    >>> x = TensorInfo("x", (4,), "float32", "cpu", 4, 16, True, storage="s1", storage_bytes=16)
    >>> g = Graph((Node("n0", NodeKind.OUTPUT, "output", y), Node("n1", NodeKind.OP, "ExpBackward0", y, recency=0),
    ...            Node("n2", NodeKind.SAVED, "result", y), Node("n3", NodeKind.LEAF, "x", x)),
    ...           (Edge("n1", "n0"), Edge("n2", "n1", EdgeKind.SAVED), Edge("n3", "n1")))
    >>> # y = x.exp(): the output (also saved), its 4-byte gradient, and the 16 bytes ExpBackward0 makes for x
    >>> memory_timeline(g).peak_bytes
    36
    """
    # Tens of thousands of small records: the cyclic GC would rescan them over and over (none forms a cycle).
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _timeline(graph, retain_graph, roots, forward_peak_bytes, sums_in_place)
    finally:
        if gc_was_enabled:
            gc.enable()


def _timeline(graph: Graph, retain_graph: bool, roots: Collection[str] | None, forward_peak_bytes: int | None,
              sums_in_place: bool) -> MemoryTimeline:
    plan = plan_backward(graph, roots)
    if forward_peak_bytes is None:  # a graph saved after a run carries the forward's peak on its roots
        forward_peak_bytes = plan.forward_peak
    replay = EngineReplay(plan, retain_graph=retain_graph, track=True, sums_in_place=sums_in_place)
    steps = replay.run()
    peaks = list(map(_PEAK, steps))
    peak_step = peaks.index(max(peaks))  # the first step reaching it
    peak_bytes = max(peaks[peak_step], forward_peak_bytes or 0)
    owners, held = _last_savers(plan, replay.order)
    held_at_peak, at_peak = _at_peak(plan, replay.alive_at_peak(), owners)
    return MemoryTimeline(
        steps=tuple(steps),
        peak_bytes=peak_bytes,
        peak_step=peak_step,
        held=_in_graph_order(plan, held),
        held_at_peak=_in_graph_order(plan, held_at_peak),
        at_peak=at_peak,
        retain_graph=retain_graph,
        notes=tuple(_notes(graph, plan, forward_peak_bytes is not None)),
        forward_peak_bytes=forward_peak_bytes,
    )


_PEAK = attrgetter("peak")


def _in_graph_order(plan: BackwardPlan, held: dict[str, int]) -> tuple[tuple[str, int], ...]:
    owners = sorted(held, key=plan.index.__getitem__)
    return tuple(zip(owners, map(held.__getitem__, owners), strict=True))


def _last_savers(plan: BackwardPlan, order: list[str]) -> tuple[dict[str, str], dict[str, int]]:
    """Each saved storage's owner: the saver backward runs last (it releases it), or one it never runs; and the
    bytes each owner holds that way."""
    ran: dict[str, int] | None = None  # each node's turn, needed only for a storage several ops saved
    never = len(order)
    ids, storage_bytes = plan.ids, plan.storage_bytes
    owners: dict[str, str] = {}
    held: dict[str, int] = {}
    for key, savers in plan.savers.items():
        if len(savers) == 1:
            owner = ids[savers[0]]
        else:
            if ran is None:
                ran = {node: i for i, node in enumerate(order)}
            turn = ran.get
            owner = ids[max(savers, key=lambda s: (turn(ids[s], never), -s))]
        owners[key] = owner
        held[owner] = held.get(owner, 0) + storage_bytes[key]
    return owners, held


def _at_peak(plan: BackwardPlan, alive: dict[Any, tuple[str, str, int]], owners: dict[str, str],
             ) -> tuple[dict[str, int], tuple[ModuleBytes, ...]]:
    """What each node holds at the peak (a saved storage under the saver that releases it), and the same by module."""
    saved, output = HolderKind.SAVED.value, NodeKind.OUTPUT
    nodes, output_op = plan.nodes, plan.output_op
    held: dict[str, int] = {}
    modules: dict[str, str | None] = {}
    totals: dict[str | None, dict[str, int]] = {}
    for key, (kind, owner, size) in alive.items():
        if kind == saved:
            owner = owners.get(key, owner)
        held[owner] = held.get(owner, 0) + size
        if owner in modules:
            module = modules[owner]
        else:  # the owner's module; an output's is the module of the op that made it
            n: Node | None = nodes[owner]
            if n is not None and n.kind is output:
                op = output_op.get(owner)
                n = nodes[op] if op is not None else None
            module = modules[owner] = n.module if n is not None else None
        kinds = totals.get(module)
        if kinds is None:
            kinds = totals[module] = {}
        kinds[kind] = kinds.get(kind, 0) + size
    rows = [ModuleBytes(module, **kinds) for module, kinds in totals.items()]
    return held, tuple(sorted(rows, key=lambda r: (-r.total, r.module or "")))


def _notes(graph: Graph, plan: BackwardPlan, forward_known: bool) -> list[str]:
    notes = []
    if not forward_known:
        notes.append("the forward's own peak is not replayed from a graph (only the end of the forward is): "
                     "measure() or forecast() count it as the step runs")
    if graph.truncated:
        notes.append("the graph was cut off by max_nodes: ops further from the output are not counted")
    facts = plan.facts
    if not facts.saved:
        notes.append("no saved tensor in the graph (traced with show_saved=False, or an op-only graph): "
                     "only gradients and outputs are counted")
    freed = facts.freed - facts.packed
    modelled = sum(len(v) for v in plan.recomputed.values())
    packed = facts.packed - modelled
    # A run counted the step (its forward's peak is known), or trace_model ran each op's backward on meta (its
    # outputs say so, through save and load too): an op with no temporaries recorded made none.
    recorded = bool(plan.temporaries) or forward_known or any(
        k == TEMPORARIES_FOUND_ATTR for n in graph.nodes if n.kind is NodeKind.OUTPUT for k, _ in n.attrs)
    if modelled:
        own = ("the recompute's own temporaries are counted with the op that unpacked first" if recorded
               else "not counted: the recompute's own temporaries")
        notes.append(f"{modelled} saved tensor(s) in {len(plan.block_savers)} block(s) under non-reentrant "
                     "checkpointing are recomputed just before the block's first backward node that needs one and "
                     "held until their node has run, the inputs only a checkpoint keeps until its block's backward "
                     f"is done; {own}; a tensor two ops saved is counted "
                     "for each (parameters and block inputs are told apart by shape)")
    if packed:
        notes.append(f"{packed} saved tensor(s) are packed by a saved-tensor hook (non-reentrant checkpointing): "
                     "backward recomputes them just before the block's backward; the replay does not count that "
                     "recompute (measure() and forecast() do)")
    blocks = facts.reentrant
    counted = sum(1 for b in blocks if b in plan.temporaries or b in plan.nested)
    if counted:
        notes.append(f"{counted} block(s) under reentrant checkpointing (CheckpointFunctionBackward): each runs its "
                     "forward again and a nested backward inside that node, neither in this graph; counted as the "
                     "step ran: the most they held at once inside the node, and the .grad of the block's "
                     "parameters they leave (a parameter also used outside the block once: its gradient from "
                     "outside is summed into that .grad)")
    if len(blocks) > counted:
        notes.append(f"{len(blocks) - counted} block(s) under reentrant checkpointing (CheckpointFunctionBackward): "
                     "each runs its forward again and a nested backward inside that node, neither in this graph; the "
                     "replay counts only the block's input and output (measure() and forecast() count the rest)")
    if not recorded and facts.ops:
        notes.append("the temporaries each op's backward makes and frees inside (beyond the gradients it returns) "
                     "are not in this graph: measure() and forecast() record them as the step runs")
    if freed:
        notes.append(f"{freed} saved tensor(s) were already freed by backward() when traced: trace before "
                     "backward() to count them")
    if facts.unknown_recency:
        notes.append("some ops have no recency (a graph from an older file): they run in walk order")
    return notes
