"""Replay the autograd engine over a BackwardPlan, counting the bytes alive at every node."""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any

from .plan import LEAF_RANK, LEAVES_BELOW, MAKES_SAME, MAKES_VIEW, BackwardPlan
from .records import HolderKind, MemoryStep

__all__ = ["EngineReplay", "Recompute"]

_NEVER = 1 << 62
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
    view is a new value on the same storage. Each storage is one entry
    `[references, bytes, kind, owner, key, ...]` (kind a `HolderKind` value, owner the node holding it; `_new`);
    `store` finds the named ones (saved tensors, outputs, a leaf's `.grad`), a gradient's is reached through
    its values only. With `track`, every storage's life is logged so `alive_at_peak()` can say,
    after the run, what was alive when the peak was first reached. Nodes are the plan's numbers (`BackwardPlan`);
    owners, steps and `order` name them by id.
    """

    def __init__(self, plan: BackwardPlan, *, retain_graph: bool, recompute: Recompute | None = None,
                 track: bool = False, sums_in_place: bool = True) -> None:
        self.plan = plan
        self.ids = plan.ids
        self.sums_in_place = sums_in_place
        index = plan.index
        self.temporaries = {index[n]: size for n, size in _temporaries(plan).items()}  # by node number
        self.extra = set(self.temporaries) | {index[n] for n in plan.nested}
        self.nested_leaves = {leaf for made in plan.nested_leaves.values() for leaf, _ in made}
        self.recompute = recompute or Recompute()
        self.deps = list(plan.deps)
        self.retain_graph = retain_graph
        # storage key -> its entry (`_new`), for the named storages
        self.store: dict[str, list[Any]] = {}
        # op -> {output_nr: value} (None: no gradient yet); a value is [storage entry, holders, logical bytes,
        # whether a view]
        self.buffers: list[dict[int, list[Any]] | None] = [None] * len(plan.ids)
        self.live = 0
        self.order: list[str] = []
        self._next = 0
        self.track = track
        self.moment = 0  # counts changes to what is alive (with `track`)
        self.best, self.best_moment = -1, 0
        # with `track`, every storage's entry, in the order they were made
        self.history: list[list[Any]] = []
        self._start()
        # What `_run_op` reads at every op, in one load (none of these is replaced while the replay runs)
        self._tables = (plan, plan.ids, plan.sends, plan.sizes, plan.makes, plan.saved_by, self.buffers, self.deps,
                        plan.ranks, self.ready, self.extra, self.temporaries, track, retain_graph, sums_in_place)

    # -- storages and values -------------------------------------------------
    def _new(self, key: Any, size: int, kind: str, owner: str, count: int) -> list[Any]:
        """A storage's entry: [references, bytes, kind, owner, key]; with `track`, its life follows: the moment it
        went (_NEVER while alive), then (moment, kind, owner) flat for its start and each change of holder."""
        self.live += size
        if self.track:
            self.moment += 1
            entry = [count, size, kind, owner, key, _NEVER, self.moment, kind, owner]
            self.history.append(entry)
            return entry
        return [count, size, kind, owner, key]

    def _hold(self, key: str, size: int, kind: str, owner: str, count: int = 1) -> None:
        entry = self.store.get(key)
        if entry is not None:
            entry[0] += count
            return
        self.store[key] = self._new(key, size, kind, owner, count)

    def _release(self, key: str) -> None:
        entry = self.store[key]
        entry[0] -= 1
        if entry[0] == 0:
            del self.store[key]
            self.live -= entry[1]
            if self.track:
                self.moment += 1
                entry[5] = self.moment

    def _release_entry(self, entry: list[Any]) -> None:
        entry[0] -= 1
        if entry[0] == 0:
            if type(entry[4]) is str:
                del self.store[entry[4]]
            self.live -= entry[1]
            if self.track:
                self.moment += 1
                entry[5] = self.moment

    def _relabel(self, entry: list[Any], kind: str, owner: str) -> None:
        entry[2], entry[3] = kind, owner
        if self.track:
            self.moment += 1
            entry += (self.moment, kind, owner)

    def _alloc(self, size: int, owner: str, logical: int) -> list[Any]:
        """A new gradient value on a storage of its own (a number for its key: never looked up)."""
        self._next += 1
        return [self._new(self._next, size, _GRADIENTS, owner, 1), 1, logical, False]

    def _drop(self, value: list[Any]) -> None:
        value[1] -= 1
        if value[1] == 0:
            self._release_entry(value[0])

    def _exclusive(self, value: list[Any]) -> bool:
        """Whether torch sums into this buffered gradient in place (InputBuffer::accumulate): one holder of the
        tensor and of its storage, not expanded, not a view (a gradient that came through `t()` or `view()` keeps
        its base, so its storage has two holders). Never while a TorchDispatchMode is on (`sums_in_place` False):
        torch then treats every tensor as a subclass and sums into a new one. Both read from torch.profiler's
        memory events, torch 2.13: three uses of a weight (w * 2, w * 3, w * 4) peak at two gradients plain and
        at three under a no-op mode."""
        if not self.sums_in_place:
            return False
        entry, holders, logical, view = value
        return holders == 1 and entry[0] == 1 and logical <= entry[1] and not view

    def _check_peak(self, peak: int) -> int:
        live = self.live
        if live > self.best:
            self.best, self.best_moment = live, self.moment
        return peak if peak > live else live

    def alive_at_peak(self) -> dict[Any, tuple[str, str, int]]:
        """Storage key -> (kind, owner, bytes) of what was alive when the peak was first reached (needs `track`)."""
        at = self.best_moment
        found: dict[Any, tuple[str, str, int]] = {}
        for entry in self.history:
            if entry[6] > at or entry[5] <= at:
                continue
            last, end = 6, len(entry)  # the holder at `at`: the last change made by then
            while last + 3 < end and entry[last + 3] <= at:
                last += 3
            found[entry[4]] = (entry[last + 1], entry[last + 2], entry[1])
        return found

    # -- the step ------------------------------------------------------------
    def _hold_saved(self, key: str, copy: bool = False) -> None:
        """Hold a saved storage for its savers (those holding a checkpoint's copy apart), or, with `copy`,
        the copy for them."""
        savers, ids = self.plan.savers[key], self.ids
        copies = self.recompute.copies
        if copies or copy:
            away = copies.get(key, frozenset())
            savers = [s for s in savers if (ids[s] in away) == copy]
            if not savers:
                return
        reachable = self.plan.reachable
        pending = sum(1 for s in savers if reachable[s])
        # Held for good: the graph retained, or a saver that backward never runs.
        count = 1 if self.retain_graph else pending + (1 if pending < len(savers) else 0)
        self._hold(_copy_key(key) if copy else key, self.plan.storage_bytes[key], _SAVED, ids[savers[0]], count)

    def _start(self) -> None:
        plan = self.plan
        skipped = self.recompute.skipped
        if skipped or self.recompute.copies:
            for key in plan.savers:
                if key not in skipped:
                    self._hold_saved(key)
        else:  # the usual case, without the calls: every saved storage held by its savers
            reachable, storage_bytes, retain, new, store, ids = (plan.reachable, plan.storage_bytes,
                                                                 self.retain_graph, self._new, self.store, self.ids)
            for key, savers in plan.savers.items():
                if len(savers) == 1:
                    count = 1 if retain or reachable[savers[0]] else 2
                else:
                    pending = sum(1 for s in savers if reachable[s])
                    count = 1 if retain else pending + (1 if pending < len(savers) else 0)
                store[key] = new(key, storage_bytes[key], _SAVED, ids[savers[0]], count)
        for key, (size, owner) in self.recompute.kept.items():
            self._hold(key, size, _SAVED, owner)
        for node, size in plan.reentrant_keeps.items():  # kept by the node until the graph is freed
            self._hold(f"reentrant keeps:{node}", size, _SAVED, node)
        for key, output in plan.outputs.items():
            self._hold(key, plan.storage_bytes[key], _OUTPUTS, output)
        # Non-reentrant checkpointing keeps each block's inputs until the block's last saver has run.
        self.block_left = {b: sum(1 for s in savers if plan.reachable[s]) for b, savers in plan.block_savers.items()}
        for block, size in plan.block_kept.items():
            if size:
                self._hold(f"kept:{block}", size, _SAVED, self.ids[plan.block_savers[block][0]])
        for op, output_nr, size, item in plan.roots:
            value = self._alloc(item, self.ids[op], size)
            value[0][0] += 1  # backward() holds the gradients it starts from until it returns
            self._deliver(op, output_nr, value, 0)
        # The ready nodes' ranks alone: a rank names its node (`plan.LEAF_RANK`), and a heap of ints is twice as fast
        # as one of (rank, node) pairs when a node makes thousands ready at once (a stack's backward)
        self.ready = [plan.ranks[n] for n in dict.fromkeys(op for op, _, _, _ in plan.roots) if not self.deps[n]]
        heapq.heapify(self.ready)

    def _deliver(self, target: int, output_nr: int, value: list[Any], peak: int) -> int:
        """Put a gradient into `target`'s input buffer, summing with one already there (InputBuffer::add)."""
        slot = self.buffers[target]
        if slot is None:
            self.buffers[target] = {output_nr: value}
        else:
            old = slot.get(output_nr)
            if old is not None:
                return self._sum(target, output_nr, old, value, peak)
            slot[output_nr] = value
        entry = value[0]
        if entry[0] == 1 and entry[2] == _GRADIENTS:
            self._relabel(entry, _GRADIENTS, self.ids[target])
        return peak

    def _sum(self, target: int, output_nr: int, old: list[Any], value: list[Any], peak: int) -> int:
        """A second gradient for one input: InputBuffer::accumulate, `old.add_(var)` in place, else `old + var`,
        a new tensor."""
        if self._exclusive(old):
            self._drop(value)
        else:
            logical = old[2]
            self.buffers[target][output_nr] = self._alloc(logical, self.ids[target], logical)  # type: ignore[index]
            peak = self._check_peak(peak)
            self._drop(old)
            self._drop(value)
        return peak

    def run(self) -> list[MemoryStep]:
        """Run backward to the end; one MemoryStep for the end of the forward, then one per node run."""
        steps = [MemoryStep(None, self.live, self.live, self.live)]
        self._check_peak(self.live)
        ready, plan, deferred, recopied = self.ready, self.plan, self.recompute.deferred, self.recompute.recopied
        released_after = self.recompute.released_after
        block_of, recomputed, done = plan.block_of, plan.recomputed, set()
        # Nodes with checkpointing work around them; the rest (nearly all) take the short way.
        index = plan.index
        special = {*block_of, *recomputed, *(index[n] for n in (*deferred, *recopied, *released_after))}
        order, pop, add_step = self.order, heapq.heappop, steps.append
        run_leaf, run_op, new_step = self._run_leaf, self._run_op, _Step
        ids, per_recency, leaves_below, leaf_rank = self.ids, len(self.ids) + 1, LEAVES_BELOW, LEAF_RANK
        while ready:
            rank = pop(ready)  # names its node (`plan.LEAF_RANK`)
            leaf = rank < leaves_below
            number = rank - leaf_rank if leaf else rank % per_recency
            node = ids[number]
            before = self.live
            if number not in special:
                peak = run_leaf(number) if leaf else run_op(number)
                after = self.live
                order.append(node)
                step = new_step()  # `MemoryStep(node, before, peak, after)`, without its frozen __init__'s calls
                step.node, step.before, step.after = node, before, after
                step.peak = peak if peak > before and peak > after else (before if before > after else after)
                step.__class__ = MemoryStep  # type: ignore[assignment]
                add_step(step)  # type: ignore[arg-type]
                continue
            block = block_of.get(number)
            if block is not None and block not in done:  # non-reentrant checkpointing: the block's forward again
                done.add(block)
                self._recompute_block(block)
            for key in deferred.get(node, ()):  # a checkpointed module's forward runs again
                self._hold_saved(key)
            for key in recopied.get(node, ()):
                self._hold_saved(key, copy=True)
            peak = run_leaf(number) if leaf else run_op(number)
            for key in released_after.get(node, ()):
                self._release(key)
            for key, _ in recomputed.get(number, ()):  # unpacked once: the checkpoint drops its handle
                if key in self.store:
                    self._release(key)
            if block is not None:
                self.block_left[block] -= 1
                if self.block_left[block] == 0 and f"kept:{block}" in self.store:
                    self._release(f"kept:{block}")
            order.append(node)
            add_step(MemoryStep(node, before, max(peak, before, self.live), self.live))
        return steps

    def _recompute_block(self, block: str) -> None:
        """Hold every saved tensor the block's recompute makes, for the op that will unpack it."""
        plan = self.plan
        for saver in plan.block_savers.get(block, ()):
            if not plan.reachable[saver]:
                continue
            for key, size in plan.recomputed[saver]:
                if size:
                    self._hold(key, size, _SAVED, self.ids[saver])

    def _run_leaf(self, number: int) -> int:
        """AccumulateGrad: `.grad` takes the gradient itself when nothing else holds it, else a copy; where `.grad`
        exists already (made by a reentrant block's nested backward), the gradient is summed into it in place."""
        inputs = self.buffers[number]
        self.buffers[number] = None
        value = inputs.get(0) if inputs else None
        peak = self.live
        if value is None:
            return peak
        node = self.ids[number]
        if node in self.nested_leaves and f"grad:{node}" in self.store:  # a nested backward made it: summed in place
            self._drop(value)
            return peak
        leaf_bytes = self.plan.sizes[number]
        if value[1] == 1 and value[0][1] >= leaf_bytes:  # stolen: the value stays, held by .grad
            entry = value[0]
            entry[4] = key = f"grad:{node}"  # named from now on, as a copied .grad is (a subclass may free it)
            self.store[key] = entry
            self._relabel(entry, _GRADS, node)
            return peak
        self._hold(f"grad:{node}", leaf_bytes, _GRADS, node)
        peak = self._check_peak(peak)
        self._drop(value)
        return peak

    def _run_op(self, number: int) -> int:
        """One op's backward: its gradients made, its temporaries, its input buffer and saved tensors released,
        its gradients delivered (`_deliver`, written out for a target's first gradient: the usual case).

        The hottest code of the replay (once per op of a graph of 100,000s): tables and counters are read into
        locals once, the counters written back before any method that reads them is called."""
        (plan, ids, sends_of, sizes, makes_of, saved_by, buffers, deps, ranks, ready, extra, temporaries, track,
         retain_graph, in_place) = self._tables
        inputs = buffers[number]
        if inputs is not None:
            buffers[number] = None
        node = ids[number]
        made: list[tuple[int, int, list[Any]]] = []
        entry: list[Any]
        sends = sends_of[number]
        if sends:
            makes = makes_of[number]
            incoming = None
            if inputs and makes:
                incoming = inputs.get(0)
                if incoming is None:
                    incoming = next(iter(inputs.values()))
            own = sizes[number] if makes else -1
            history, made_count, live, moment = self.history, self._next, self.live, self.moment
            for target, output_nr, at in sends:
                need = plan.output_bytes(target, output_nr) if output_nr else sizes[target]
                if incoming is not None:
                    if makes == MAKES_VIEW:
                        incoming[0][0] += 1  # a new value on the incoming gradient's storage
                        made.append((target, output_nr, [incoming[0], 1, need, True]))
                        continue
                    if need == own and (makes == MAKES_SAME or at == 0):  # MAKES_SAME_FIRST: at slot 0 only
                        incoming[1] += 1
                        made.append((target, output_nr, incoming))
                        continue
                # a new tensor: `_alloc`, written out (most ops, most gradients)
                made_count += 1
                live += need
                if track:
                    moment += 1
                    entry = [1, need, _GRADIENTS, node, made_count, _NEVER, moment, _GRADIENTS, node]
                    history.append(entry)
                else:
                    entry = [1, need, _GRADIENTS, node, made_count]
                made.append((target, output_nr, [entry, 1, need, False]))
            self._next, self.live, self.moment = made_count, live, moment
        if number in extra:
            self._extra(number)
        peak = live = self.live
        moment = self.moment
        if peak > self.best:
            self.best, self.best_moment = peak, moment
        if number in temporaries:
            self._release(f"temporaries:{node}")
            live, moment = self.live, self.moment
        store = self.store
        if inputs:
            for value in inputs.values():
                value[1] -= 1
                if value[1] == 0:  # `_release_entry(value[0])`, written out
                    entry = value[0]
                    entry[0] -= 1
                    if entry[0] == 0:
                        if type(entry[4]) is str:
                            del store[entry[4]]
                        live -= entry[1]
                        if track:
                            moment += 1
                            entry[5] = moment
        if not retain_graph:
            saved = saved_by[number]
            if saved:
                copies = self.recompute.copies
                for key in saved:  # `_release(key)`, written out (a storage's key names its entry)
                    entry = store[_copy_key(key) if copies and node in copies.get(key, ()) else key]
                    entry[0] -= 1
                    if entry[0] == 0:
                        del store[entry[4]]
                        live -= entry[1]
                        if track:
                            moment += 1
                            entry[5] = moment
        if not made:
            self.live, self.moment = live, moment
            return peak
        push = heapq.heappush
        for target, output_nr, value in made:
            slot = buffers[target]
            if slot is None:  # the first gradient for this input (`_deliver`, written out)
                buffers[target] = {output_nr: value}
                first = True
            else:
                first = output_nr not in slot
                if first:
                    slot[output_nr] = value
                else:
                    old = slot[output_nr]
                    if in_place and old[1] == 1 and old[0][0] == 1 and old[2] <= old[0][1] and not old[3]:
                        value[1] -= 1  # `_exclusive(old)`: summed into it in place, `value` dropped
                        if value[1] == 0:
                            entry = value[0]
                            entry[0] -= 1
                            if entry[0] == 0:  # `_release_entry`, written out
                                if type(entry[4]) is str:
                                    del store[entry[4]]
                                live -= entry[1]
                                if track:
                                    moment += 1
                                    entry[5] = moment
                    else:
                        self.live, self.moment = live, moment
                        peak = self._sum(target, output_nr, old, value, peak)
                        live, moment = self.live, self.moment
            if first:
                entry = value[0]
                if entry[0] == 1 and entry[2] == _GRADIENTS:  # `_relabel`, written out: now the target's
                    owner = entry[3] = ids[target]
                    if track:
                        moment += 1
                        entry += (moment, _GRADIENTS, owner)
            left = deps[target] - 1
            deps[target] = left
            if not left:
                push(ready, ranks[target])
        self.live, self.moment = live, moment
        return peak

    def _extra(self, number: int) -> None:
        """What the op holds beyond its gradients: a reentrant checkpoint's nested .grad (they stay; a leaf of this
        graph's under its own name, `grad:<leaf>`, as its AccumulateGrad would have made it), and the temporaries its
        backward made and freed inside (released once the peak is read)."""
        node = self.ids[number]
        nested = self.plan.nested.get(node, 0)
        for leaf, size in self.plan.nested_leaves.get(node, ()):  # the .grad of a leaf of this graph: held as its own
            nested -= size
            if f"grad:{leaf}" not in self.store:  # else summed into it in place (a what-if replay ran the leaf first)
                self._hold(f"grad:{leaf}", size, _GRADS, leaf)
        if nested:
            self._hold(f"nested:{node}", nested, _GRADS, node)
        temporaries = self.temporaries.get(number)
        if temporaries:
            self._hold(f"temporaries:{node}", temporaries, _GRADIENTS, node)



class _Step:
    """A MemoryStep while it is filled in: the same slots, then given MemoryStep's class. A frozen dataclass's
    __init__ sets each field through `object.__setattr__` (0.8 us a step, a tenth of the replay of a fan of 160,000
    nodes); the record made this way is the same MemoryStep (equal, hashable, `dataclasses.replace` works)."""

    __slots__ = ("node", "before", "peak", "after")
    node: str | None
    before: int
    peak: int
    after: int


def _copy_key(key: str) -> str:
    """The storage key of the copy a checkpoint's recompute makes of saved storage `key`."""
    return f"{key} recomputed"


def _temporaries(plan: BackwardPlan) -> dict[str, int]:
    """Each op's temporaries as recorded, less the recomputed saved tensors it unpacked: those were alive inside
    the op when it was measured and gone when it returned, and the replay holds them already (until it has run)."""
    found = {}
    for node, size in plan.temporaries.items():
        left = size - sum(b for _, b in plan.recomputed.get(plan.index[node], ()))
        if left > 0:
            found[node] = left
    return found
