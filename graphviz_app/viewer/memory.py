"""The viewer's memory blocks: the bytes each node and box holds at the peak, and live bytes over backward.

Colouring by the bytes held **at the peak** (not by the bytes saved at the end of the
forward, which the built-in "memory" colouring already shows) answers the question a
person opens this view with: what fills memory at its worst moment, so what to
checkpoint or shrink. Ops that backward has already run by then hold nothing and stay
grey; those still waiting light up. Each storage alive at the peak has one owner (the op
whose backward releases it, the op whose input buffer holds a gradient, the leaf whose
`.grad` it is, the output the user holds), so a box's sum over its members counts every
storage once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..analysis.distributed import CollectiveEvent, FsdpUnit, RankMemory
from ..analysis.distributed_replay import rank_timeline
from ..analysis.memory import MeasuredMemory, MemoryTimeline, memory_timeline
from ..model import Graph, NodeKind, RankInfo, human_bytes
from .tree import Tree

__all__ = ["REPLAY_LIMIT", "MemoryView", "memory_view", "held_overlay", "live_series", "measured_series",
           "collective_marks", "rank_lines"]

# The most backward ops the viewer replays: the replay costs about 25 µs an op (a 100,000-op graph:
# 2.5 s, more than the rest of its payload), so past this the chart is left out with a note.
REPLAY_LIMIT = 25_000


@dataclass(frozen=True, slots=True)
class MemoryView:
    """What the memory replay adds to the viewer's payload: an overlay, a series, the peak node, notes.

    `peak` is the index of the node running at the peak (None: none, or the peak
    is the end of the forward), `peak_label` says the peak in words; `notes` say
    why nothing was added.
    """

    overlays: list[dict[str, Any]] = field(default_factory=list)
    series: list[dict[str, Any]] = field(default_factory=list)
    peak: int | None = None
    peak_label: str = ""
    notes: list[str] = field(default_factory=list)

    def mark(self, overlays: list[dict[str, Any]]) -> None:
        """Mark the peak node in every memory colouring of `overlays` (in place)."""
        for o in overlays:
            if o.get("unit") == "bytes" and self.peak is not None:
                o.update(mark=[self.peak], mark_label=self.peak_label, mark_badge="peak")


def memory_view(graph: Graph, tree: Tree, *, measured: MeasuredMemory | None = None, rank: RankMemory | None = None,
                units: Sequence[FsdpUnit] = ()) -> MemoryView:
    """Replay backward over `graph` (`memory_timeline`) and turn the result into viewer blocks.

    With `measured` (a measurement of the step this graph was traced from), a second
    series beside the predicted one: the live bytes measured at each backward step
    (`measured_series`). With `rank` (a rank's figures, `trace_rank_step(...).memory`), its
    collectives are marked on the chart at the step where each was issued (`collective_marks`)
    and its figures and DDP buckets written under it (`rank_lines`); with FSDP `units`, the
    replay is a rank's (`rank_timeline`). A graph traced inside a rank carries its rank
    (`Graph.rank`: collectives, units): used when `rank` and `units` are not given.

    Left out, with a note, when the graph cannot say: it holds no saved tensors
    (traced with `show_saved=False`), it was cut off by `max_nodes`, or its ops
    carry no backward order (`Node.recency`: a graph from an older file); and when
    it has more than `REPLAY_LIMIT` ops, so that the replay never makes up most of
    the time the payload takes. A graph without ops gets neither blocks nor a note.

    >>> from graphviz_app.model import Node
    >>> from graphviz_app.viewer.tree import build_tree
    >>> g = Graph((Node("n0", NodeKind.OUTPUT, "output"), Node("n1", NodeKind.OP, "ExpBackward0")), ())
    >>> memory_view(g, build_tree(g)).notes
    ['no memory chart: the graph holds no saved tensors (traced with show_saved=False)']
    """
    ops = [n for n in graph.nodes if n.kind is NodeKind.OP]
    if not ops:
        return MemoryView()
    if not any(n.kind is NodeKind.SAVED for n in graph.nodes):
        return MemoryView(notes=["no memory chart: the graph holds no saved tensors (traced with show_saved=False)"])
    if graph.truncated:
        return MemoryView(notes=["no memory chart: the graph was cut off by max_nodes, so backward's memory "
                                 "cannot be replayed (trace with a larger max_nodes)"])
    if any(n.recency is None for n in ops):
        return MemoryView(notes=["no memory chart: the graph's ops carry no backward order (a graph saved by an "
                                 "older version: trace it again)"])
    if len(ops) > REPLAY_LIMIT:
        return MemoryView(notes=[f"no memory chart: {len(ops):,} backward ops, more than the viewer replays "
                                 f"({REPLAY_LIMIT:,}); memory_timeline(graph) gives the timeline"])
    carried = graph.rank
    shown: RankMemory | RankInfo | None = rank if rank is not None else carried
    if not units and carried is not None:
        units = carried.units
    buckets = carried is not None and carried.grads_in_buckets
    timeline = rank_timeline(graph, units=units, grads_in_buckets=buckets) if units or buckets else (
        memory_timeline(graph))
    index = {n.id: i for i, n in enumerate(graph.nodes)}
    peak = index.get(timeline.peak_node) if timeline.peak_node is not None else None
    series = [live_series(timeline, index, len(graph.nodes))]
    if shown is not None:
        series[0]["events"] = collective_marks(shown.collectives, timeline, index)
        series[0]["notes"] = rank_lines(shown) + series[0]["notes"]
    if measured is not None:
        series.append(measured_series(timeline, measured))
    return MemoryView(overlays=[held_overlay(timeline, tree, index)], series=series, peak=peak,
                      peak_label=_peak_text(timeline))


def held_overlay(timeline: MemoryTimeline, tree: Tree, index: dict[str, int]) -> dict[str, Any]:
    """The overlay "bytes held at the peak": per node what it keeps alive then, per box its members' sum.

    `MemoryView.mark` marks the peak node in it (`mark`, with `mark_label` for the legend).
    """
    node: list[float | None] = [None] * len(index)
    group: list[float | None] = [None] * len(tree.parent)
    for node_id, size in timeline.held_at_peak:
        i = index[node_id]
        node[i] = float(size)
        g = tree.node_group[i]
        group[g] = (group[g] or 0.0) + size
    for g in _deepest_first(tree):  # a box holds what its boxes hold
        p = tree.parent[g]
        if p >= 0 and group[g] is not None:
            group[p] = (group[p] or 0.0) + (group[g] or 0.0)
    return {"key": "held", "label": "bytes held at the peak", "scale": "log", "unit": "bytes",
            "node": node, "group": group, "flag": []}


def live_series(timeline: MemoryTimeline, index: dict[str, int], nodes: int) -> dict[str, Any]:
    """The series "live bytes over backward": per step the most bytes alive while its node runs.

    Step 0 is the end of the forward; step k the k-th backward node the engine
    runs (`node_step` maps node index to step, -1 for nodes that do not run).
    `peak` is the step of the peak, so `values[peak] == timeline.peak_bytes`.
    """
    node_step = [-1] * nodes
    for k, step in enumerate(timeline.steps):
        if step.node is not None:
            node_step[index[step.node]] = k
    return {"key": "live_bytes", "label": "live bytes over backward", "unit": "bytes", "x_label": "backward step",
            "values": [s.peak for s in timeline.steps], "node_step": node_step, "peak": timeline.peak_step,
            "peak_label": _peak_text(timeline), "notes": list(timeline.notes)}


def measured_series(timeline: MemoryTimeline, measured: MeasuredMemory) -> dict[str, Any]:
    """The series "measured live bytes": per predicted step, the most bytes measured while its node ran.

    Steps are the timeline's (`of: "live_bytes"`: the viewer draws it as a second line on
    that chart): step k holds what was measured while `timeline.steps[k].node` ran
    (step 0: the end of the forward), None for a node the measured run did not reach.
    `peak` is the step measured at the peak and `peak_bytes` the measured peak (it can
    fall inside the forward: then `peak` is 0 and `peak_bytes` exceeds every value).

    Raises:
        ValueError: `measured` ran none of the timeline's backward nodes (it measured another graph).

    >>> from graphviz_app.analysis.memory import MemoryStep
    >>> t = MemoryTimeline((MemoryStep(None, 8, 8, 8), MemoryStep("n1", 8, 24, 8)), 24, 1)
    >>> m = MeasuredMemory((MemoryStep(None, 8, 8, 8), MemoryStep("n1", 8, 40, 8)), 40, 8, "storages", "cpu")
    >>> s = measured_series(t, m)
    >>> s["values"], s["peak"], s["peak_bytes"]
    ([8, 40], 1, 40)
    """
    at = {s.node: s.peak for s in measured.steps}
    ran = [s.node for s in timeline.steps if s.node is not None]
    if ran and not any(node in at for node in ran):
        raise ValueError("the measurement ran none of this graph's backward nodes (it measured another graph): "
                         "pass the graph measured with it, e.g. m = measure(model, x); save(m.graph, 'step.html', "
                         "measured=m.measured)")
    values = [at.get(s.node) for s in timeline.steps]
    step = {s.node: k for k, s in enumerate(timeline.steps)}
    peak = step.get(measured.peak_node, 0)
    where = "during the forward" if measured.peak_node is None else f"at step {peak}"
    return {"key": "measured_bytes", "of": "live_bytes", "label": "measured live bytes", "unit": "bytes",
            "x_label": "backward step", "values": values, "peak": peak, "peak_bytes": measured.peak_bytes,
            "peak_label": f"measured peak {human_bytes(measured.peak_bytes)} {where}",
            "method": measured.method, "device": measured.device}


def collective_marks(events: Sequence[CollectiveEvent], timeline: MemoryTimeline,
                     index: dict[str, int]) -> list[dict[str, Any]]:
    """The chart's marks for a rank's collectives: op, bytes, phase, and the step (and node index) where each was
    issued; those of the forward, and of backward before its first node, at step 0; the optimizer's at the end.

    >>> from graphviz_app.analysis.memory import MemoryStep
    >>> t = MemoryTimeline((MemoryStep(None, 0, 0, 0), MemoryStep("n1", 0, 8, 8)), 8, 1)
    >>> collective_marks([CollectiveEvent("all_reduce", 64, "backward", 8, "n1")], t, {"n0": 0, "n1": 1})
    [{'op': 'all_reduce', 'bytes': 64, 'phase': 'backward', 'step': 1, 'node': 1}]
    """
    step = {s.node: k for k, s in enumerate(timeline.steps) if s.node is not None}
    last = len(timeline.steps) - 1
    marks: list[dict[str, Any]] = []
    for e in events:
        mark: dict[str, Any] = {"op": e.op, "bytes": e.bytes, "phase": e.phase,
                                "step": last if e.phase == "optimizer" else step.get(e.node or "", 0)}
        if e.node is not None and e.node in index:
            mark["node"] = index[e.node]
        marks.append(mark)
    return marks


def rank_lines(rank: RankMemory | RankInfo) -> list[str]:
    """A rank's figures in words, for under its chart: rank, strategy, collectives, DDP's buckets.

    A graph's own `RankInfo` (no figures beside the graph's) gives the first line only.

    >>> from graphviz_app.analysis.distributed import CollectiveEvent
    >>> rank_lines(RankInfo(1, 2, "TP", (CollectiveEvent("allreduce_", 64, "backward", 8, None),)))
    ['rank 1 of 2 (TP): collectives: 1 allreduce_']
    """
    counts: dict[str, int] = {}
    for e in rank.collectives:
        counts[e.op] = counts.get(e.op, 0) + 1
    ops = ", ".join(f"{n} {op}" for op, n in counts.items()) or "none"
    if isinstance(rank, RankInfo):
        return [f"rank {rank.rank} of {rank.world_size} ({rank.strategy}): collectives: {ops}"]
    lines = [f"rank {rank.rank} of {rank.world_size} ({rank.strategy}): total {human_bytes(rank.total_bytes)} "
             f"(step peak {human_bytes(rank.peak_bytes)}, parameters {human_bytes(rank.params_bytes)}); "
             f"collectives: {ops}"]
    if rank.buckets_bytes:
        lines.append(f"DDP gradient buckets: {human_bytes(rank.buckets_bytes)}")
    return lines + list(rank.notes)


def _peak_text(timeline: MemoryTimeline) -> str:
    where = "at the end of the forward" if timeline.peak_node is None else f"at step {timeline.peak_step}"
    return f"peak {human_bytes(timeline.peak_bytes)} {where}"


def _deepest_first(tree: Tree) -> list[int]:
    """Every box but the whole graph, children before their parents."""
    depth = [0] * len(tree.parent)
    for g in range(1, len(tree.parent)):
        d, p = 0, tree.parent[g]
        while p > 0:
            d, p = d + 1, tree.parent[p]
        depth[g] = d + 1
    return sorted(range(1, len(tree.parent)), key=lambda g: -depth[g])
