"""Replay the autograd engine over a BackwardPlan, counting the bytes alive at every node."""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any

from ...model import NodeKind
from .plan import BackwardPlan
from .records import MemoryStep
from .rules import Makes, makes

__all__ = ["EngineReplay", "Recompute"]


@dataclass(frozen=True, slots=True)
class Recompute:
    """What checkpointing some modules changes: saved storages that are not kept by the forward but
    made again (`deferred[node]`) just before `node`, the first of their module to run in backward;
    inputs the checkpoint keeps that nothing else would (`kept`: key -> (bytes, owner)), until the
    node that `released_after` lists them under has run."""

    deferred: dict[str, list[str]] = field(default_factory=dict)
    kept: dict[str, tuple[int, str]] = field(default_factory=dict)
    released_after: dict[str, list[str]] = field(default_factory=dict)

    @property
    def skipped(self) -> frozenset[str]:
        return frozenset(k for keys in self.deferred.values() for k in keys)


class EngineReplay:
    """One replay of backward: storages with reference counts, gradient values in input buffers.

    A storage (a saved tensor's, an output's, a gradient's) is alive while
    anything refers to it: an op that saved it and has not run, the user (an
    output), a gradient value. A gradient value is one tensor: the same value
    may sit in several input buffers (add passes its gradient on unchanged), a
    view is a new value on the same storage. `owner[key]` names the node that
    holds a storage, `kind[key]` how (see `records.HOLDER_KINDS`).
    """

    def __init__(self, plan: BackwardPlan, *, retain_graph: bool, owners: dict[str, str] | None = None,
                 recompute: Recompute | None = None) -> None:
        self.plan = plan
        self.recompute = recompute or Recompute()
        self.owners = owners or {}
        self.deps = dict(plan.deps)
        self.retain_graph = retain_graph
        self.size: dict[str, int] = {}
        self.refs: dict[str, int] = {}
        self.kind: dict[str, str] = {}
        self.owner: dict[str, str] = {}
        # value id -> [storage key, holders, logical bytes]
        self.values: dict[int, list[Any]] = {}
        self.buffers: dict[str, dict[int, int]] = {}
        self.live = 0
        self.order: list[str] = []
        self._next = 0
        # storage key -> (kind, owner, bytes) of every storage alive at the snapshot
        self.snapshot: dict[str, tuple[str, str, int]] | None = None
        self._snap_at: int | None = None
        self._start()

    # -- storages and values -------------------------------------------------
    def _hold(self, key: str, size: int, kind: str, owner: str, count: int = 1) -> None:
        if key not in self.refs:
            self.refs[key] = 0
            self.size[key] = size
            self.kind[key] = kind
            self.owner[key] = owner
            self.live += size
        self.refs[key] += count

    def _release(self, key: str) -> None:
        self.refs[key] -= 1
        if self.refs[key] == 0:
            self.live -= self.size.pop(key)
            del self.refs[key], self.kind[key], self.owner[key]

    def _new_value(self, key: str, logical: int) -> int:
        self._next += 1
        self.values[self._next] = [key, 1, logical]
        return self._next

    def _alloc(self, size: int, owner: str, logical: int | None = None) -> int:
        key = f"g{self._next + 1}"
        self._hold(key, size, "gradients", owner)
        return self._new_value(key, size if logical is None else logical)

    def _view(self, value: int, logical: int) -> int:
        key = self.values[value][0]
        self.refs[key] += 1
        return self._new_value(key, logical)

    def _drop(self, value: int) -> None:
        v = self.values[value]
        v[1] -= 1
        if v[1] == 0:
            del self.values[value]
            self._release(v[0])

    def _exclusive(self, value: int) -> bool:
        """Whether torch may reuse this gradient in place: one holder of the tensor and of its storage, not expanded."""
        key, holders, logical = self.values[value]
        return holders == 1 and self.refs[key] == 1 and logical <= self.size[key]

    def _check_peak(self, peak: int) -> int:
        if self._snap_at is not None and self.live >= self._snap_at and self.snapshot is None:
            self.snapshot = {k: (self.kind[k], self.owner[k], self.size[k]) for k in self.refs}
        return max(peak, self.live)

    # -- the step ------------------------------------------------------------
    def _hold_saved(self, key: str) -> None:
        savers = self.plan.savers[key]
        pending = sum(1 for s in savers if s in self.plan.reachable)
        # Held for good: the graph retained, or a saver that backward never runs.
        count = 1 if self.retain_graph else pending + (1 if pending < len(savers) else 0)
        self._hold(key, self.plan.storage_bytes[key], "saved", self.owners.get(key, savers[0]), count)

    def _start(self) -> None:
        plan = self.plan
        skipped = self.recompute.skipped
        for key in plan.savers:
            if key not in skipped:
                self._hold_saved(key)
        for key, (size, owner) in self.recompute.kept.items():
            self._hold(key, size, "saved", owner)
        for key, output in plan.outputs.items():
            self._hold(key, plan.storage_bytes[key], "outputs", output)
        for op, output_nr, size, item in plan.roots:
            value = self._alloc(item, op, logical=size)
            self.refs[self.values[value][0]] += 1  # backward() holds the gradients it starts from until it returns
            self._deliver(op, output_nr, value, 0)
        self.ready = [(plan.priority(n), n) for n in dict.fromkeys(op for op, _, _, _ in plan.roots)
                      if self.deps.get(n, 0) == 0]
        heapq.heapify(self.ready)

    def _deliver(self, target: str, output_nr: int, value: int, peak: int) -> int:
        """Put a gradient into `target`'s input buffer, summing with one already there (InputBuffer::add)."""
        slot = self.buffers.setdefault(target, {})
        old = slot.get(output_nr)
        if old is None:
            slot[output_nr] = value
            key = self.values[value][0]
            if self.kind[key] == "gradients" and self.refs[key] == 1:
                self.owner[key] = target
            return peak
        if self._exclusive(old):
            self._drop(value)
        elif self._exclusive(value):
            slot[output_nr] = value
            self._drop(old)
        else:
            slot[output_nr] = self._alloc(self.values[old][2], target)
            peak = self._check_peak(peak)
            self._drop(old)
            self._drop(value)
        return peak

    def run(self, *, until: int | None = None, peak_at: int | None = None) -> list[MemoryStep]:
        """Run backward to the end (or through step `until`); with `peak_at`, snapshot the first moment reaching it."""
        self._snap_at = peak_at
        steps = [MemoryStep(None, self.live, self.live, self.live)]
        if peak_at is not None and self.live >= peak_at:
            self._check_peak(self.live)
        while self.ready and (until is None or len(steps) <= until):
            _, node = heapq.heappop(self.ready)
            before = self.live
            for key in self.recompute.deferred.get(node, ()):  # a checkpointed module's forward runs again
                self._hold_saved(key)
            peak = self._run_leaf(node) if self.plan.nodes[node].kind is NodeKind.LEAF else self._run_op(node)
            for key in self.recompute.released_after.get(node, ()):
                self._release(key)
            self.order.append(node)
            steps.append(MemoryStep(node, before, max(peak, before, self.live), self.live))
        return steps

    def _run_leaf(self, node: str) -> int:
        """AccumulateGrad: `.grad` takes the gradient itself when nothing else holds it, else a copy."""
        inputs = self.buffers.pop(node, {})
        value = inputs.get(0)
        peak = self.live
        if value is None:
            return peak
        key = self.values[value][0]
        leaf_bytes = self.plan.output_bytes(node, 0)
        if self.values[value][1] == 1 and self.size[key] >= leaf_bytes:
            self.kind[key], self.owner[key] = "grads", node  # stolen: the value stays, held by .grad
            return peak
        self._hold(f"grad:{node}", leaf_bytes, "grads", node)
        peak = self._check_peak(peak)
        self._drop(value)
        return peak

    def _run_op(self, node: str) -> int:
        plan = self.plan
        inputs = self.buffers.pop(node, {})
        incoming = inputs.get(0, next(iter(inputs.values()), None))
        name = plan.nodes[node].name
        own = plan.output_bytes(node, 0)
        made: list[tuple[str, int, int]] = []
        for target, output_nr, slot in plan.sends.get(node, ()):
            need = plan.output_bytes(target, output_nr)
            how = makes(name, slot, need, own) if incoming is not None else Makes.NEW
            if how is Makes.SAME and incoming is not None:
                self.values[incoming][1] += 1
                made.append((target, output_nr, incoming))
            elif how is Makes.VIEW and incoming is not None:
                made.append((target, output_nr, self._view(incoming, need)))
            else:
                made.append((target, output_nr, self._alloc(need, node)))
        peak = self._check_peak(self.live)
        for value in inputs.values():
            self._drop(value)
        if not self.retain_graph:
            for key in self._kept_by(node):
                self._release(key)
        for target, output_nr, value in made:
            peak = self._deliver(target, output_nr, value, peak)
            self.deps[target] -= 1
            if self.deps[target] == 0:
                heapq.heappush(self.ready, (plan.priority(target), target))
        return peak

    def _kept_by(self, node: str) -> list[str]:
        return self.plan.saved_by.get(node, [])
