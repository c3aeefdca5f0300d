"""Checkpoint advice: which modules to wrap in `torch.utils.checkpoint` to bring a step's peak under a budget.

What wrapping module M (non-reentrant checkpointing) changes, as modelled: the tensors
M's ops save are not kept by the forward (M's inputs are: the checkpoint needs them);
when backward first reaches an op of M that saved something, M's forward runs again and
they all exist again, each released when its op has run, as before. A tensor saved both
by an op of M and by one outside (M's last op saving its result, which the next op saves
as its input) stays for the outside one, and the recompute makes a copy for M's. The cost
is M's forward once more, in floating-point operations estimated from the graph's shapes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from ...model import Graph, NodeKind, human_bytes
from .flops import forward_flops
from .levers import Lever
from .plan import BackwardPlan, plan_backward
from .records import HolderKind, MemoryTimeline
from .replay import EngineReplay, Recompute

__all__ = ["CheckpointPlan", "plan_checkpoints", "recompute_for", "checkpointed_timeline", "POOL", "REPLAYS"]


@dataclass(frozen=True, slots=True)
class CheckpointPlan:
    """Modules to checkpoint, with the peak predicted before and after and the recompute it costs.

    `reached` says whether the predicted peak after is at most the budget;
    `freed` gives, per module, the saved bytes the forward no longer keeps.
    `measured_peak_before` and `measured_peak_after` are filled by a verify run.
    `replay_peaks` is (before, after) as the replay predicted them when `predicted_peak_before/after` come from
    running the step with and without the modules checkpointed on fake tensors (`forecast_plan`).
    `levers`, when the plan does not reach the budget and the step could be run again, predict (and once
    verified, measure) what lowers the peak otherwise, from the step's forecast peak `levers_baseline`, with the
    modules `levers_on` checkpointed (the plan's, where the step could be forecast with them; else none).
    """

    modules: tuple[str, ...]
    budget_bytes: int
    predicted_peak_before: int
    predicted_peak_after: int
    recompute_flops: int
    forward_flops: int
    freed: tuple[tuple[str, int], ...] = ()
    measured_peak_before: int | None = None
    measured_peak_after: int | None = None
    held_at_peak: tuple[tuple[str, int], ...] = ()
    levers: tuple[Lever, ...] = ()
    levers_baseline: int | None = None
    replay_peaks: tuple[int, int] | None = None
    levers_on: tuple[str, ...] = ()

    @property
    def reached(self) -> bool:
        return self.predicted_peak_after <= self.budget_bytes

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the modules, `predicted_peak_after`, and `measured_peak_after` once verified."""
        return {
            "modules": list(self.modules), "budget_bytes": self.budget_bytes, "reached": self.reached,
            "predicted_peak_before": self.predicted_peak_before, "predicted_peak_after": self.predicted_peak_after,
            "recompute_flops": self.recompute_flops, "forward_flops": self.forward_flops,
            "freed": dict(self.freed),
            "measured_peak_before": self.measured_peak_before, "measured_peak_after": self.measured_peak_after,
            "held_at_peak": dict(self.held_at_peak),
            "replay_peak_before": self.replay_peaks[0] if self.replay_peaks else None,
            "replay_peak_after": self.replay_peaks[1] if self.replay_peaks else None,
            "levers_baseline_bytes": self.levers_baseline, "levers": [lever.to_dict() for lever in self.levers],
            "levers_on_modules": list(self.levers_on),
        }

    def __str__(self) -> str:
        if not self.modules:
            if self.reached:
                return (f"no checkpoint needed: the predicted peak {human_bytes(self.predicted_peak_before)} is "
                        f"already under the peak's budget {human_bytes(self.budget_bytes)}")
            held = ", ".join(f"{HolderKind(kind).label} {human_bytes(size)}" for kind, size in self.held_at_peak
                             if size)
            text = (f"no checkpoint lowers the predicted peak {human_bytes(self.predicted_peak_before)} under "
                    f"the peak's budget {human_bytes(self.budget_bytes)}: checkpointing frees saved tensors, and what "
                    f"holds the peak is mostly not them{f' ({held})' if held else ''}")
            return "\n".join([text, *self._lever_lines()])
        share = self.recompute_flops / self.forward_flops if self.forward_flops else 0.0
        lines = [f"checkpoint {len(self.modules)} module(s): predicted peak {human_bytes(self.predicted_peak_before)}"
                 f" -> {human_bytes(self.predicted_peak_after)} (the peak's budget {human_bytes(self.budget_bytes)}"
                 f"{'' if self.reached else ', not reached'}), recomputing {share:.0%} of the forward's FLOPs"]
        if self.replay_peaks is not None:
            lines.append(f"  forecast with and without them on fake tensors; the graph's replay chose them "
                         f"({human_bytes(self.replay_peaks[0])} -> {human_bytes(self.replay_peaks[1])})")
        lines += [f"  {name}: {human_bytes(size)} no longer kept" for name, size in self.freed]
        lines.append(f"to checkpoint them in training: graphviz_app.memory.checkpoint_modules(model, "
                     f"{list(self.modules)!r})")
        if self.measured_peak_after is not None:
            lines.append(f"verified: applied non-reentrant checkpointing to {', '.join(self.modules)}")
            lines.append(f"measured: {human_bytes(self.measured_peak_before or 0)} -> "
                         f"{human_bytes(self.measured_peak_after)} (predicted "
                         f"{human_bytes(self.predicted_peak_before)} -> {human_bytes(self.predicted_peak_after)})")
        return "\n".join(lines + (self._lever_lines() if not self.reached else []))

    def _lever_lines(self) -> list[str]:
        if not self.levers or self.levers_baseline is None:
            return ["levers that do lower it: free each .grad as soon as it is accumulated (optimizer in backward, "
                    "register_post_accumulate_grad_hook), autocast bfloat16, a smaller micro-batch with gradient "
                    "accumulation, a loss computed in chunks over the tokens"]
        on = (f"on top of checkpointing the plan's {len(self.levers_on)} module(s)" if self.levers_on
              else "on the step as it is" + (", not on top of the plan (the step with the plan's modules "
                                             "checkpointed cannot be forecast here)" if self.modules else ""))
        return [f"levers beyond checkpointing, each predicted {on}, from a forecast peak of "
                f"{human_bytes(self.levers_baseline)}:"] + [
            lever.line(self.levers_baseline, self.budget_bytes) for lever in self.levers]


def _inside(module: str | None, outer: str) -> bool:
    return module is not None and (module == outer or module.startswith(outer + "."))


@dataclass(slots=True)
class _Modules:
    """Per module: its op nodes, and the saved storages only its ops keep."""

    ops: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    names: list[str] = field(default_factory=list)


def _modules(plan: BackwardPlan) -> _Modules:
    found = _Modules()
    for node_id, n in plan.nodes.items():
        if n.kind is NodeKind.OP and n.module:
            parts = n.module.split(".")
            for i in range(1, len(parts) + 1):
                found.ops[".".join(parts[:i])].append(node_id)
    found.names = sorted(found.ops, key=lambda m: (m.count("."), m))
    return found


def recompute_for(plan: BackwardPlan, modules: Collection[str], order: list[str]) -> Recompute:
    """The Recompute of checkpointing `modules` (no one inside another), given the backward `order`."""
    rank = {plan.index[node]: i for i, node in enumerate(order)}  # by node number, as the plan's tables
    ids, op = plan.ids, NodeKind.OP
    recompute = Recompute()
    for module in modules:
        inside = {i for i, node in enumerate(plan.node_at) if node.kind is op and _inside(node.module, module)}
        touched = [k for k, savers in plan.savers.items() if any(s in inside for s in savers)]
        keys = [k for k in touched if all(s in inside for s in plan.savers[k])]
        kept = _kept_inputs(plan, inside, touched, recompute, module, rank)
        # Saved inside and outside (the module's last op saving its result, which the next op saves too):
        # the forward keeps it for the outside savers; the recompute makes a copy for the inside ones.
        shared = [k for k in touched if k not in kept and k not in keys]
        keys = [k for k in keys if k not in kept]
        savers = [s for s in inside if plan.saved_by[s] and s in rank]
        if (keys or shared) and savers:
            trigger = ids[min(savers, key=rank.__getitem__)]
            if keys:
                recompute.deferred.setdefault(trigger, []).extend(keys)
            for k in shared:
                recompute.copies[k] = recompute.copies.get(k, frozenset()) | {ids[s] for s in plan.savers[k]
                                                                             if s in inside}
                recompute.recopied.setdefault(trigger, []).append(k)
    return recompute


def _kept_inputs(plan: BackwardPlan, inside: set[int], keys: list[str], recompute: Recompute, module: str,
                 rank: dict[int, int]) -> set[str]:
    """M's inputs, which the checkpoint keeps: a storage an input op saves with the entering tensor's size,
    else an extra storage held until M's last op has run (`inside`: M's ops, by node number)."""
    kept: set[str] = set()
    last = max((n for n in inside if n in rank), key=rank.__getitem__, default=None)
    by_size = {k: plan.storage_bytes[k] for k in keys}
    entering: list[tuple[int, int, int]] = []  # (src, output_nr, dst) for each tensor entering M
    for dst in sorted(inside):
        entering.extend((src, output_nr, dst) for src, output_nr, _ in plan.sends[dst] or ()
                        if src not in inside and plan.node_at[src].kind is NodeKind.OP)
    matched: set[tuple[int, int]] = set()
    for src, output_nr, dst in entering:
        size = plan.output_bytes(src, output_nr)
        # an op saving its own result (tanh, exp) does not save the tensor entering the module
        match = next((k for k in plan.saved_by[dst] or ()
                      if by_size.get(k) == size and (dst, k) not in plan.results), None)
        if match is not None:
            kept.add(match)
            matched.add((src, output_nr))
    for src, output_nr, dst in entering:
        size = plan.output_bytes(src, output_nr)
        # One tensor entering M twice (a residual: the block's norm saves x, its add only reads it) is kept once.
        if (src, output_nr) in matched or last is None or not size:
            continue
        key = f"checkpoint input {module}:{plan.ids[src]}:{output_nr}"
        if key not in recompute.kept:
            recompute.kept[key] = (size, plan.ids[dst])
            recompute.released_after.setdefault(plan.ids[last], []).append(key)
    return kept


def _peak(plan: BackwardPlan, recompute: Recompute, retain_graph: bool, sums_in_place: bool) -> int:
    return max(s.peak for s in EngineReplay(plan, retain_graph=retain_graph, recompute=recompute,
                                            sums_in_place=sums_in_place).run())


def plan_checkpoints(graph: Graph, budget_bytes: int, *, roots: Collection[str] | None = None,
                     retain_graph: bool = False, runnable: Collection[str] | None = None,
                     sums_in_place: bool = True) -> CheckpointPlan:
    """Modules to checkpoint so the predicted peak is at most `budget_bytes`, at little recompute.

    Greedy, on replays of backward: each round tries every candidate module (a
    module replaces those inside it) and takes the one that lowers the peak
    most per FLOP it adds, until the peak is under the budget; then the
    costliest are dropped again where the budget still holds. Candidates are
    the `POOL` modules freeing most saved bytes per recomputed FLOP; a module
    freeing less than 1% of the peak (one whose inputs are all it saves frees
    nothing) is never one. When no choice reaches the budget, the plan is the
    lowest found (`reached` False). `runnable`, when given, names the modules whose `forward` runs in
    the step: only those are candidates (a `ModuleList` or `ModuleDict` container never is: its members are).
    `sums_in_place` as `memory_timeline`'s: False for the graph of a step counted under a dispatch mode
    (`measure`, `forecast`), so that the plan's peaks are counted as that step's.
    """
    plan = plan_backward(graph, roots)
    base = EngineReplay(plan, retain_graph=retain_graph, sums_in_place=sums_in_place)
    before = max(s.peak for s in base.run())
    flops = forward_flops(graph)
    total = sum(flops.values())
    if before <= budget_bytes:
        return CheckpointPlan((), budget_bytes, before, before, 0, total)
    modules = _modules(plan)
    cost = {m: sum(flops.get(n, 0) for n in ops) for m, ops in modules.ops.items()}
    freed = {m: _freed(plan, m, base.order) for m in modules.names}
    worth = max(1, before // 100)  # a module freeing under 1% of the peak cannot move it much
    names = modules.names if runnable is None else [m for m in modules.names if m in set(runnable)]
    pool = sorted((m for m in names if freed[m] >= worth), key=lambda m: (-freed[m] / max(1, cost[m]), m))

    def peak_of(chosen: list[str]) -> int:
        return _peak(plan, recompute_for(plan, chosen, base.order), retain_graph, sums_in_place)

    chosen, peak = _greedy(pool[:POOL], cost, before, budget_bytes, peak_of)
    for m in sorted(chosen, key=lambda m: -cost[m]):
        trial = [c for c in chosen if c != m]
        trial_peak = peak_of(trial)
        if trial_peak <= budget_bytes or (peak > budget_bytes and trial_peak <= peak):
            chosen, peak = trial, trial_peak
    ordered = sorted(chosen, key=modules.names.index)
    held = () if chosen else _held_at_peak(plan, retain_graph, sums_in_place)
    return CheckpointPlan(tuple(ordered), budget_bytes, before, peak, sum(cost[m] for m in chosen), total,
                          tuple((m, freed[m]) for m in ordered), held_at_peak=held)


def _held_at_peak(plan: BackwardPlan, retain_graph: bool, sums_in_place: bool) -> tuple[tuple[str, int], ...]:
    """Bytes alive at the replay's peak by holder kind (HolderKind values, in its order)."""
    replay = EngineReplay(plan, retain_graph=retain_graph, track=True, sums_in_place=sums_in_place)
    replay.run()
    totals = dict.fromkeys((k.value for k in HolderKind), 0)
    for kind, _, size in replay.alive_at_peak().values():
        totals[kind] += size
    return tuple(totals.items())


# Candidate modules a plan is chosen from, and the most replays one plan may take.
POOL = 32
REPLAYS = 400


def _greedy(pool: list[str], cost: dict[str, int], before: int, budget: int,
            peak_of: Callable[[list[str]], int]) -> tuple[list[str], int]:
    chosen: list[str] = []
    peak, replays = before, 0
    while peak > budget and replays < REPLAYS:
        best: tuple[float, list[str], int] | None = None
        spent = sum(cost[c] for c in chosen)
        for m in pool:
            if m in chosen or any(_inside(m, c) for c in chosen):
                continue
            trial = [c for c in chosen if not _inside(c, m)] + [m]  # m takes the place of those inside it
            trial_peak = peak_of(trial)
            replays += 1
            score = (peak - trial_peak) / max(1, sum(cost[c] for c in trial) - spent)
            if trial_peak < peak and (best is None or score > best[0]):
                best = (score, trial, trial_peak)
        if best is None:
            break
        _, chosen, peak = best
    return chosen, peak


def _freed(plan: BackwardPlan, module: str, order: list[str]) -> int:
    recompute = recompute_for(plan, [module], order)
    return sum(plan.storage_bytes[k] for k in recompute.skipped) - sum(s for s, _ in recompute.kept.values())


def checkpointed_timeline(graph: Graph, modules: Collection[str], *, roots: Collection[str] | None = None,
                          retain_graph: bool = False) -> MemoryTimeline:
    """The timeline of the step with `modules` checkpointed (steps and peak; no breakdown)."""
    plan = plan_backward(graph, roots)
    base = EngineReplay(plan, retain_graph=retain_graph)
    base.run()
    steps = EngineReplay(plan, retain_graph=retain_graph, recompute=recompute_for(plan, modules, base.order)).run()
    peak_step = max(range(len(steps)), key=lambda i: (steps[i].peak, -i))
    return MemoryTimeline(tuple(steps), steps[peak_step].peak, peak_step, retain_graph=retain_graph)
