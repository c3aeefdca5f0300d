"""Replay the autograd engine over a BackwardPlan, counting the bytes alive at every node."""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any

from ...model import NodeKind
from .plan import BackwardPlan
from .records import HolderKind, MemoryStep
from .rules import SAME_FIRST, SAME_WHEN_SAME_SIZE, VIEWS

__all__ = ["EngineReplay", "Recompute"]

_NEVER = 1 << 62
_UNKNOWN_RECENCY = 1 << 62  # as plan.priority: ops of unknown recency run after those of known recency
_SAVED, _GRADIENTS, _GRADS, _OUTPUTS = (k.value for k in HolderKind)


@dataclass(frozen=True, slots=True)
class Recompute:
    """What checkpointing some modules changes: saved storages that are not kept by the forward but
    made again (`deferred[node]`) just before `node`, the first of their module to run in backward;
    inputs the checkpoint keeps that nothing else would (`kept`: key -> (bytes, owner)), until the
    node that `released_after` lists them under has run. A storage saved both inside a module and
    outside it stays, held by the savers outside; the savers inside (`copies[key]`) hold a copy the
    recompute makes (`recopied[node]`: the keys whose copy is made just before `node`)."""

    deferred: dict[str, list[str]] = field(default_factory=dict)
    kept: dict[str, tuple[int, str]] = field(default_factory=dict)
    released_after: dict[str, list[str]] = field(default_factory=dict)
    copies: dict[str, frozenset[str]] = field(default_factory=dict)
    recopied: dict[str, list[str]] = field(default_factory=dict)

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
    holds a storage, `kind[key]` how (a `HolderKind` value). With
    `track`, every storage's life is logged so `alive_at_peak()` can say,
    after the run, what was alive when the peak was first reached.
    """

    def __init__(self, plan: BackwardPlan, *, retain_graph: bool, recompute: Recompute | None = None,
                 track: bool = False, sums_in_place: bool = True) -> None:
        self.plan = plan
        self.sums_in_place = sums_in_place
        self.temporaries = _temporaries(plan)
        self.extra = set(self.temporaries) | set(plan.nested)
        self.priority = _priorities(plan)
        self.recompute = recompute or Recompute()
        self.deps = dict(plan.deps)
        self.retain_graph = retain_graph
        # storage key -> [references, bytes, kind, owner] (one table: the replay's hottest lookups)
        self.store: dict[str, list[Any]] = {}
        # value id -> [storage key, holders, logical bytes]
        self.values: dict[int, list[Any]] = {}
        self.views: set[int] = set()  # values that are views of another value's storage
        self.buffers: dict[str, dict[int, int]] = {}
        self.live = 0
        self.order: list[str] = []
        self._next = 0
        self.track = track
        self.moment = 0  # counts changes to what is alive (with `track`)
        self.best, self.best_moment = -1, 0
        # storage key -> [bytes, the moment it went (_NEVER while alive), (moment, kind, owner), ...]
        self.history: dict[str, list[Any]] = {}
        self._start()

    # -- storages and values -------------------------------------------------
    def _hold(self, key: str, size: int, kind: str, owner: str, count: int = 1) -> None:
        entry = self.store.get(key)
        if entry is not None:
            entry[0] += count
            return
        self.store[key] = [count, size, kind, owner]
        self.live += size
        if self.track:
            self.moment += 1
            self.history[key] = [size, _NEVER, (self.moment, kind, owner)]

    def _release(self, key: str) -> None:
        entry = self.store[key]
        entry[0] -= 1
        if entry[0] == 0:
            self.live -= entry[1]
            del self.store[key]
            if self.track:
                self.moment += 1
                self.history[key][1] = self.moment

    def _relabel(self, key: str, kind: str, owner: str) -> None:
        entry = self.store[key]
        entry[2], entry[3] = kind, owner
        if self.track:
            self.moment += 1
            self.history[key].append((self.moment, kind, owner))

    def _alloc(self, size: int, owner: str, logical: int) -> int:
        self._next += 1
        key = f"g{self._next}"
        self._hold(key, size, _GRADIENTS, owner)
        self.values[self._next] = [key, 1, logical]
        return self._next

    def _view(self, value: int, logical: int) -> int:
        key = self.values[value][0]
        self.store[key][0] += 1
        self._next += 1
        self.values[self._next] = [key, 1, logical]
        self.views.add(self._next)
        return self._next

    def _drop(self, value: int) -> None:
        v = self.values[value]
        v[1] -= 1
        if v[1] == 0:
            del self.values[value]
            self.views.discard(value)
            self._release(v[0])

    def _exclusive(self, value: int) -> bool:
        """Whether torch sums into this buffered gradient in place (InputBuffer::accumulate): one holder of the
        tensor and of its storage, not expanded, not a view (a gradient that came through `t()` or `view()` keeps
        its base, so its storage has two holders). Never while a TorchDispatchMode is on (`sums_in_place` False):
        torch then treats every tensor as a subclass and sums into a new one. Both read from torch.profiler's
        memory events, torch 2.13: three uses of a weight (w * 2, w * 3, w * 4) peak at two gradients plain and
        at three under a no-op mode."""
        if not self.sums_in_place:
            return False
        key, holders, logical = self.values[value]
        entry = self.store[key]
        return holders == 1 and entry[0] == 1 and logical <= entry[1] and value not in self.views

    def _check_peak(self, peak: int) -> int:
        live = self.live
        if live > self.best:
            self.best, self.best_moment = live, self.moment
        return peak if peak > live else live

    def alive_at_peak(self) -> dict[str, tuple[str, str, int]]:
        """Storage key -> (kind, owner, bytes) of what was alive when the peak was first reached (needs `track`)."""
        at = self.best_moment
        found: dict[str, tuple[str, str, int]] = {}
        for key, (size, died, *changes) in self.history.items():
            if changes[0][0] > at or died <= at:
                continue
            _, kind, owner = max((c for c in changes if c[0] <= at), key=lambda c: c[0])
            found[key] = (kind, owner, size)
        return found

    # -- the step ------------------------------------------------------------
    def _hold_saved(self, key: str, copy: bool = False) -> None:
        """Hold a saved storage for its savers (those holding a checkpoint's copy apart), or, with `copy`,
        the copy for them."""
        savers = self.plan.savers[key]
        copies = self.recompute.copies
        if copies or copy:
            away = copies.get(key, frozenset())
            savers = [s for s in savers if (s in away) == copy]
            if not savers:
                return
        reachable = self.plan.reachable
        pending = (1 if savers[0] in reachable else 0) if len(savers) == 1 else sum(1 for s in savers if s in reachable)
        # Held for good: the graph retained, or a saver that backward never runs.
        count = 1 if self.retain_graph else pending + (1 if pending < len(savers) else 0)
        self._hold(_copy_key(key) if copy else key, self.plan.storage_bytes[key], _SAVED, savers[0], count)

    def _start(self) -> None:
        plan = self.plan
        skipped = self.recompute.skipped
        for key in plan.savers:
            if key not in skipped:
                self._hold_saved(key)
        for key, (size, owner) in self.recompute.kept.items():
            self._hold(key, size, _SAVED, owner)
        for node, size in plan.reentrant_keeps.items():  # kept by the node until the graph is freed
            self._hold(f"reentrant keeps:{node}", size, _SAVED, node)
        for key, output in plan.outputs.items():
            self._hold(key, plan.storage_bytes[key], _OUTPUTS, output)
        # Non-reentrant checkpointing keeps each block's inputs until the block's last saver has run.
        self.block_left = {b: sum(1 for s in savers if s in plan.reachable) for b, savers in plan.block_savers.items()}
        for block, size in plan.block_kept.items():
            if size:
                self._hold(f"kept:{block}", size, _SAVED, plan.block_savers[block][0])
        for op, output_nr, size, item in plan.roots:
            value = self._alloc(item, op, size)
            self.store[self.values[value][0]][0] += 1  # backward() holds the gradients it starts from until it returns
            self._deliver(op, output_nr, value, 0)
        self.ready = [(self.priority[n], n) for n in dict.fromkeys(op for op, _, _, _ in plan.roots)
                      if self.deps.get(n, 0) == 0]
        heapq.heapify(self.ready)

    def _deliver(self, target: str, output_nr: int, value: int, peak: int) -> int:
        """Put a gradient into `target`'s input buffer, summing with one already there (InputBuffer::add)."""
        slot = self.buffers.get(target)
        if slot is None:
            slot = self.buffers[target] = {}
        old = slot.get(output_nr)
        if old is None:
            slot[output_nr] = value
            key = self.values[value][0]
            entry = self.store[key]
            if entry[0] == 1 and entry[2] == _GRADIENTS:
                self._relabel(key, _GRADIENTS, target)
            return peak
        if self._exclusive(old):  # InputBuffer::accumulate: old.add_(var) in place, else old + var, a new tensor
            self._drop(value)
        else:
            logical = self.values[old][2]
            slot[output_nr] = self._alloc(logical, target, logical)
            peak = self._check_peak(peak)
            self._drop(old)
            self._drop(value)
        return peak

    def run(self) -> list[MemoryStep]:
        """Run backward to the end; one MemoryStep for the end of the forward, then one per node run."""
        steps = [MemoryStep(None, self.live, self.live, self.live)]
        self._check_peak(self.live)
        ready, plan, deferred, recopied = self.ready, self.plan, self.recompute.deferred, self.recompute.recopied
        released_after, leaf = self.recompute.released_after, NodeKind.LEAF
        block_of, recomputed, done = plan.block_of, plan.recomputed, set()
        # Nodes with checkpointing work around them; the rest (nearly all) take the short way.
        special = {*block_of, *deferred, *recopied, *released_after, *recomputed}
        nodes, order, pop = plan.nodes, self.order, heapq.heappop
        run_leaf, run_op = self._run_leaf, self._run_op
        while ready:
            node = pop(ready)[1]
            before = self.live
            if node not in special:
                peak = run_leaf(node) if nodes[node].kind is leaf else run_op(node)
                after = self.live
                order.append(node)
                steps.append(MemoryStep(node, before, peak if peak > before and peak > after
                                        else (before if before > after else after), after))
                continue
            block = block_of.get(node)
            if block is not None and block not in done:  # non-reentrant checkpointing: the block's forward again
                done.add(block)
                self._recompute_block(block)
            for key in deferred.get(node, ()):  # a checkpointed module's forward runs again
                self._hold_saved(key)
            for key in recopied.get(node, ()):
                self._hold_saved(key, copy=True)
            peak = run_leaf(node) if nodes[node].kind is leaf else run_op(node)
            for key in released_after.get(node, ()):
                self._release(key)
            for key, _ in recomputed.get(node, ()):  # unpacked once: the checkpoint drops its handle
                if key in self.store:
                    self._release(key)
            if block is not None:
                self.block_left[block] -= 1
                if self.block_left[block] == 0 and f"kept:{block}" in self.store:
                    self._release(f"kept:{block}")
            order.append(node)
            steps.append(MemoryStep(node, before, max(peak, before, self.live), self.live))
        return steps

    def _recompute_block(self, block: str) -> None:
        """Hold every saved tensor the block's recompute makes, for the op that will unpack it."""
        plan = self.plan
        for saver in plan.block_savers.get(block, ()):
            if saver not in plan.reachable:
                continue
            for key, size in plan.recomputed[saver]:
                if size:
                    self._hold(key, size, _SAVED, saver)

    def _run_leaf(self, node: str) -> int:
        """AccumulateGrad: `.grad` takes the gradient itself when nothing else holds it, else a copy."""
        inputs = self.buffers.pop(node, None)
        value = inputs.get(0) if inputs else None
        peak = self.live
        if value is None:
            return peak
        key = self.values[value][0]
        leaf_bytes = self.plan.sizes.get(node, 0)
        if self.values[value][1] == 1 and self.store[key][1] >= leaf_bytes:
            self._relabel(key, _GRADS, node)  # stolen: the value stays, held by .grad
            return peak
        self._hold(f"grad:{node}", leaf_bytes, _GRADS, node)
        peak = self._check_peak(peak)
        self._drop(value)
        return peak

    def _run_op(self, node: str) -> int:
        plan, values = self.plan, self.values
        inputs = self.buffers.pop(node, None) or {}
        incoming = inputs.get(0)
        if incoming is None and inputs:
            incoming = next(iter(inputs.values()))
        name = plan.nodes[node].name
        sizes = plan.sizes
        own = sizes.get(node, 0)
        view, same, first = name in VIEWS, name in SAME_WHEN_SAME_SIZE, name in SAME_FIRST
        made: list[tuple[str, int, int]] = []
        alloc = self._alloc
        for target, output_nr, slot in plan.sends.get(node, ()):
            need = sizes.get(target, 0) if not output_nr else plan.output_bytes(target, output_nr)
            if incoming is None:
                made.append((target, output_nr, alloc(need, node, need)))
            elif view:
                made.append((target, output_nr, self._view(incoming, need)))
            elif need == own and (same or (first and slot == 0)):
                values[incoming][1] += 1
                made.append((target, output_nr, incoming))
            else:
                made.append((target, output_nr, alloc(need, node, need)))
        if node in self.extra:
            self._extra(node)
        peak = live = self.live
        if live > self.best:
            self.best, self.best_moment = live, self.moment
        if node in self.temporaries:
            self._release(f"temporaries:{node}")
        drop = self._drop
        for value in inputs.values():
            drop(value)
        if not self.retain_graph:
            copies, release = self.recompute.copies, self._release
            for key in plan.saved_by.get(node, ()):
                release(_copy_key(key) if copies and node in copies.get(key, ()) else key)
        deps, ready, deliver, push, priority = self.deps, self.ready, self._deliver, heapq.heappush, self.priority
        for target, output_nr, value in made:
            peak = deliver(target, output_nr, value, peak)
            deps[target] -= 1
            if deps[target] == 0:
                push(ready, (priority[target], target))
        return peak

    def _extra(self, node: str) -> None:
        """What the op holds beyond its gradients: a reentrant checkpoint's nested .grad (they stay), and the
        temporaries its backward made and freed inside (released once the peak is read)."""
        nested = self.plan.nested.get(node)
        if nested:
            self._hold(f"nested:{node}", nested, _GRADS, node)
        temporaries = self.temporaries.get(node)
        if temporaries:
            self._hold(f"temporaries:{node}", temporaries, _GRADIENTS, node)


def _copy_key(key: str) -> str:
    """The storage key of the copy a checkpoint's recompute makes of saved storage `key`."""
    return f"{key} recomputed"


def _temporaries(plan: BackwardPlan) -> dict[str, int]:
    """Each op's temporaries as recorded, less the recomputed saved tensors it unpacked: those were alive inside
    the op when it was measured and gone when it returned, and the replay holds them already (until it has run)."""
    found = {}
    for node, size in plan.temporaries.items():
        left = size - sum(b for _, b in plan.recomputed.get(node, ()))
        if left > 0:
            found[node] = left
    return found


def _priorities(plan: BackwardPlan) -> dict[str, tuple[int, int, int]]:
    """`plan.priority` of every node backward runs, read once (the ready queue compares them)."""
    nodes, index, leaf = plan.nodes, plan.index, NodeKind.LEAF
    found = {}
    for n in plan.reachable:
        node = nodes[n]
        if node.kind is leaf:
            found[n] = (0, 0, index[n])
        else:
            found[n] = (1, node.recency if node.recency is not None else _UNKNOWN_RECENCY, index[n])
    return found
