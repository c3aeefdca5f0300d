"""Replay a rank's backward from its graph: local shard sizes, and FSDP2's all-gathers, unsharded parameters and
reduce-scatters, unit by unit.

The graph of a rank (`traced_rank_step`) already sizes DTensor ops as the rank's
local shards, so tensor parallelism needs nothing more than the single-process
replay. FSDP2 adds what no autograd node shows, modelled from each unit's sizes
(`FsdpUnit`) as FSDP2 runs it: a unit that reshards after forward is all-gathered
again just before its first backward node runs, and the next unit in backward
order with it (FSDP2 prefetches one); the last unit is all-gathered before backward
starts (the root's pre-backward). Gradients reach the unsharded parameters at
full size. The unit's post-backward (its `RegisterPostBackwardFunctionBackward`
node, or its last parameter's gradient when it has none) frees the unit's
parameters, copies the unsharded gradients into the reduce-scatter's input and
frees them, and keeps the gradient shards; the reduce-scatter's input is kept until
the next unit's post-backward (FSDP2 holds it so, for the stream that uses it).
A reentrant checkpoint inside a unit's forward runs its nested backward into the
unit's unsharded parameters: those `.grad` are the unit's gradients, freed by its
post-backward like the others. A reentrant checkpoint that calls a unit
(`checkpoint(unit, x)`) runs the unit's forward, its hooks and its whole backward,
post-backward included, inside its node (no post-backward node of the unit is in the
graph): the unit is resharded and reduce-scattered there, and what the node was
recorded to leave is read as that work.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence

from ..model import Graph, Node, NodeKind
from .distributed import FsdpUnit
from .memory.plan import BackwardPlan, plan_backward
from .memory.records import HolderKind, MemoryTimeline, ModuleBytes
from .memory.replay import EngineReplay

__all__ = ["rank_timeline", "unit_of"]

_SAVED, _GRADIENTS, _GRADS = HolderKind.SAVED.value, HolderKind.GRADIENTS.value, HolderKind.GRADS.value


def unit_of(module: str | None, units: Collection[str]) -> str | None:
    """The FSDP unit a module belongs to: the innermost unit whose name is it or a prefix of it.

    >>> unit_of("1.up", ["", "0", "1"]), unit_of("head", ["", "0"]), unit_of(None, ["0"])
    ('1', '', None)
    """
    if module is None:
        return "" if "" in units else None
    best: str | None = None
    for u in units:
        if (u == "" or module == u or module.startswith(u + ".")) and (best is None or len(u) > len(best)):
            best = u
    return best


def _param_name(n: Node) -> str:
    """A leaf's parameter name: its tensor's name (the node's own may be a label)."""
    return n.tensor.name if n.tensor is not None and n.tensor.name else n.name


class _FsdpReplay(EngineReplay):
    """The engine's replay with FSDP2's unit events added around the nodes (see the module docstring).

    Uses EngineReplay's storage bookkeeping (`_hold`, `_release`, `_check_peak`, `store`), as a subclass in
    this package may.
    """

    def __init__(self, plan: BackwardPlan, units: Sequence[FsdpUnit], *, retain_graph: bool,
                 grads_in_buckets: bool = False) -> None:
        self.grads_in_buckets = grads_in_buckets
        self.units = {u.name: u for u in units}
        order = [u.name for u in units if u.name != ""]
        self.next_unit = {a: b for a, b in zip(reversed(order), list(reversed(order))[1:], strict=False)}
        self.node_unit: dict[str, str] = {}
        self.leaves_left: Counter[str] = Counter()
        self.leaf_unit: dict[str, str] = {}
        param_unit = {p: u.name for u in units for p in u.params}
        names = {node_id: _param_name(n) for node_id, n in plan.nodes.items() if n.kind is NodeKind.LEAF}
        for node_id, n in plan.nodes.items():
            if n.kind is NodeKind.LEAF and names[node_id] in param_unit:
                self.leaf_unit[node_id] = self.node_unit[node_id] = param_unit[names[node_id]]
                if plan.reachable[plan.index[node_id]]:
                    self.leaves_left[param_unit[names[node_id]]] += 1
            elif n.kind is NodeKind.OP:
                unit = unit_of(n.module, self.units)
                if unit is not None:
                    self.node_unit[node_id] = unit
        sizes = {p: b for u in units for p, b in zip(u.params, u.param_bytes, strict=True)}
        for node_id in self.leaf_unit:  # gradients reach the unsharded parameter at full size
            plan.sizes[plan.index[node_id]] = sizes[names[node_id]]
        self.post_node = {self.node_unit[n]: n for n, node in plan.nodes.items()
                          if node.name == "RegisterPostBackwardFunctionBackward" and n in self.node_unit}
        # A unit whose forward a reentrant checkpoint ran (`checkpoint(unit, x)`): no post-backward node or parameter
        # leaf of it in this graph, its forward and its whole backward run again inside the checkpoint's node
        checkpoints = Counter(self.node_unit[n] for n, node in plan.nodes.items()
                              if node.name == "CheckpointFunctionBackward" and node.module == self.node_unit.get(n))
        self.inside = {n: self.node_unit[n] for n, node in plan.nodes.items()
                       if node.name == "CheckpointFunctionBackward" and checkpoints[self.node_unit.get(n, "")] == 1
                       and node.module == self.node_unit[n] != "" and self.node_unit[n] not in self.post_node
                       and self.leaves_left[self.node_unit[n]] == 0}
        self.gathered_now = 0  # the bytes the node running now all-gathered before it ran
        self.gathered: set[str] = set()
        self.reducing: str | None = None  # the last reduce-scatter's input, held until the next one
        super().__init__(plan, retain_graph=retain_graph, track=True)
        for u in units:
            if not u.reshard_after_forward:  # kept from its forward
                self._hold(f"fsdp:{u.name}", u.unsharded_bytes, _SAVED, self._owner(u.name))
                self.gathered.add(u.name)
        last = order[-1] if order else None  # the root's pre-backward all-gathers the last unit before any node runs
        if last is not None and last not in self.gathered:
            self._hold(f"fsdp:{last}", self.units[last].unsharded_bytes, _SAVED, self._owner(last))
            self.gathered.add(last)

    def _owner(self, unit: str) -> str:
        return next((n for n, u in self.leaf_unit.items() if u == unit), next(iter(self.plan.nodes)))

    def _gather(self, unit: str) -> int:
        """All-gather `unit` (and the next unit backward runs, prefetched) if not yet; the peak on the way."""
        peak = self.live
        for name in (unit, self.next_unit.get(unit)):
            if name is None or name in self.gathered:
                continue
            u, owner = self.units[name], self._owner(name)
            self.gathered.add(name)
            self._hold(f"fsdp:{name}", u.unsharded_bytes, _SAVED, owner)  # copied out of the all-gather's output
            peak = max(peak, self._check_peak(peak))
        return peak

    def _post_backward(self, unit: str) -> int:
        """The unit's post-backward: its parameters freed (resharded) first, then the reduce-scatter: its
        unsharded gradients copied into the reduce buffer and freed, the gradient shards kept (the order
        FSDP2's post-backward frees in: measured, torch 2.13)."""
        u = self.units[unit]
        leaves = {n for n, name in self.leaf_unit.items() if name == unit}
        self._reshard_and_reduce(unit, self._owner(unit))
        peak = self._check_peak(self.live)
        self._drop_grads(leaves)
        for key in [k for k in self.store if k.startswith("unit grads:") and self.node_unit.get(k[11:]) == unit]:
            self._release(key)  # a reentrant checkpoint's nested .grad: the unsharded gradients, reduce-scattered
        self._hold(f"fsdp grads:{unit}", u.sharded_grad_bytes, _GRADS, self._owner(unit))
        return self._check_peak(peak)

    def _extra(self, number: int) -> None:
        """As the engine's replay; a reentrant checkpoint's nested `.grad` inside a unit are that unit's unsharded
        gradients (up to its parameters' bytes), held under a key of their own so its post-backward frees them.
        Where the checkpoint runs the unit's whole backward (`inside`), the unit's post-backward runs in it."""
        super()._extra(number)
        node = self.ids[number]
        unit = self.node_unit.get(node)
        entry = self.store.get(f"nested:{node}")
        if node in self.inside:
            self._inside_post_backward(node, self.inside[node], entry[1] if entry is not None else 0)
            return
        if unit is None or entry is None or unit not in self.units:
            return
        size, mine = entry[1], min(entry[1], sum(self.units[unit].param_bytes))
        self._release(f"nested:{node}")
        self._hold(f"unit grads:{node}", mine, _GRADS, node)
        if size > mine:  # not the unit's parameters': stays, as the engine's replay keeps it
            self._hold(f"nested:{node}", size - mine, _GRADS, node)

    def _inside_post_backward(self, node: str, unit: str, nested: int) -> None:
        """The unit's post-backward, run by the nested backward of checkpoint `node`: the recorded `nested` bytes are
        what the node left, FSDP2's work in it included (the prefetch before it, its parameters resharded, the
        reduce-scatter's input swapped, the gradient shards kept; recorded only when more than nothing), so only
        what is left beyond FSDP2's work is held as nested `.grad`. No peak is read here: the node's temporaries
        (held after) were recorded against what the node left."""
        if nested:
            self._release(f"nested:{node}")
        start, u = self.live, self.units[unit]
        self._reshard_and_reduce(unit, node)
        self._hold(f"fsdp grads:{unit}", u.sharded_grad_bytes, _GRADS, node)
        other = nested - max(0, self.gathered_now + self.live - start)
        if other > 0:  # not FSDP2's: stays, as the engine's replay keeps it
            self._hold(f"nested:{node}", other, _GRADS, node)

    def _reshard_and_reduce(self, unit: str, owner: str) -> None:
        """The start of `unit`'s post-backward: its all-gathered parameters freed (resharded), and the reduce-scatter's
        input held in place of the one before it (the previous unit's, freed once its reduce-scatter is done)."""
        if f"fsdp:{unit}" in self.store:
            self._release(f"fsdp:{unit}")
        self.gathered.discard(unit)
        if self.reducing is not None:
            self._release(self.reducing)
        self.reducing = f"reduce:{unit}"
        self._hold(self.reducing, self.units[unit].reduce_bytes, _GRADIENTS, owner)

    def _drop_grads(self, leaves: set[str]) -> None:
        """Free the `.grad` the replay gave these leaves (FSDP2 frees them once reduce-scattered)."""
        # EngineReplay.store: storage key -> [references, bytes, kind, owner]
        for key in [k for k, entry in self.store.items() if entry[2] == _GRADS and entry[3] in leaves]:
            while key in self.store:
                self._release(key)

    def _run_op(self, number: int) -> int:
        node = self.ids[number]
        unit = self.node_unit.get(node)
        live = self.live
        peak = self._gather(unit) if unit is not None else live
        self.gathered_now = self.live - live
        peak = max(peak, super()._run_op(number))
        if unit is not None and self.post_node.get(unit) == node:
            peak = max(peak, self._post_backward(unit))
        return peak

    def _run_leaf(self, number: int) -> int:
        node = self.ids[number]
        unit = self.leaf_unit.get(node)
        peak = self._gather(unit) if unit is not None else self.live
        peak = max(peak, super()._run_leaf(number))
        if self.grads_in_buckets:  # DDP's gradient_as_bucket_view: the gradient is copied into its bucket, dropped
            self._drop_grads({node})
        if unit is not None:
            self.leaves_left[unit] -= 1
            if self.leaves_left[unit] == 0 and unit not in self.post_node:
                peak = max(peak, self._post_backward(unit))
        return peak


def rank_timeline(graph: Graph, *, units: Sequence[FsdpUnit] = (), roots: Collection[str] | None = None,
                  retain_graph: bool = False, forward_peak_bytes: int | None = None,
                  grads_in_buckets: bool = False) -> MemoryTimeline:
    """The bytes a rank's backward holds at every node, replayed from its graph and its FSDP `units`.

    `graph` is a rank's traced step (`traced_rank_step`, `measure` inside a process group): DTensor ops are
    sized as local shards there. Without `units` this is the single-process replay (`memory_timeline`'s
    counting). What counts is what `memory_timeline` counts, and FSDP2's unsharded parameters (held as "saved"
    by their unit), all-gather and reduce-scatter buffers ("gradients"), and gradient shards ("grads").
    `forward_peak_bytes`: the forward's own peak, as counted when the step ran. `grads_in_buckets`: DDP with
    `gradient_as_bucket_view=True`, whose `.grad` are views into its buckets (which exist before the step), so a
    parameter's gradient is dropped once copied there.
    """
    plan = plan_backward(graph, roots)
    replay = _FsdpReplay(plan, units, retain_graph=retain_graph, grads_in_buckets=grads_in_buckets)
    steps = replay.run()
    peak_step = max(range(len(steps)), key=lambda i: (steps[i].peak, -i))
    peak_bytes = max(steps[peak_step].peak, forward_peak_bytes or 0)
    snapshot = replay.alive_at_peak()
    held: Counter[str] = Counter()
    per_module: dict[str | None, Counter[str]] = {}
    for kind, owner, size in snapshot.values():
        held[owner] += size
        per_module.setdefault(plan.nodes[owner].module, Counter())[kind] += size
    at_peak = tuple(sorted((ModuleBytes(m, **dict(k)) for m, k in per_module.items()),
                           key=lambda r: (-r.total, r.module or "")))
    notes = []
    if units:
        notes.append(f"{len(units)} FSDP unit(s): each unit's parameters are all-gathered before its backward "
                     "(the next unit prefetched), its gradients reduce-scattered after it; CPU collectives here, "
                     "NCCL's own buffers and stream timing not modelled")
    if grads_in_buckets:
        notes.append("DDP with gradient_as_bucket_view: each .grad is a view into its bucket (counted with the "
                     "parameters), so a gradient is dropped once copied there")
    if forward_peak_bytes is None:
        notes.append("the forward's own peak is not replayed from a graph: measure() counts it as the step runs")
    return MemoryTimeline(
        steps=tuple(steps), peak_bytes=peak_bytes, peak_step=peak_step,
        held_at_peak=tuple(sorted(held.items(), key=lambda kv: plan.index[kv[0]])),
        at_peak=at_peak, retain_graph=retain_graph, notes=tuple(notes), forward_peak_bytes=forward_peak_bytes,
    )
