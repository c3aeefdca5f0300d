"""Levers that lower a peak checkpointing cannot: what each is, its predicted peak, and the chunked loss's what-if.

A lever's predicted peak comes from running the changed step on fake tensors or meta (the torch
side, `graphviz_app.tracing.memory.levers`), the chunked loss included where its head is an `nn.Linear`
whose logits only reach `F.cross_entropy`. Where it is not, the loss's chunked what-if of the replay here
(`chunked_loss_peak`: every tensor made from the logits taken at one chunk's size) is a lower bound.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Collection
from dataclasses import dataclass
from enum import Enum
from typing import Any

from ...model import EdgeKind, Graph, NodeKind, human_bytes
from .plan import BackwardPlan, plan_backward
from .replay import EngineReplay

__all__ = ["LeverKind", "Lever", "ChunkedLoss", "chunked_loss_peak", "CHUNKS"]

# Backward nodes that say the loss is a cross-entropy over the logits.
_SOFTMAX = frozenset({"LogSoftmaxBackward0", "SoftmaxBackward0", "NllLossBackward0", "NllLoss2DBackward0",
                      "CrossEntropyLossBackward0"})
# How many chunks a chunked loss is predicted with (one chunk's logits alive at a time).
CHUNKS = 8


class LeverKind(str, Enum):
    """The levers for a peak checkpointing cannot lower; the values are the JSON keys."""

    FREE_GRADS = "free_grads"
    AUTOCAST = "autocast_bf16"
    MICRO_BATCH = "micro_batch"
    CHUNKED_LOSS = "chunked_loss"
    COMBINED = "combined"


@dataclass(frozen=True, slots=True)
class Lever:
    """One lever: what it does (`what`), the step's peak predicted with it, and measured once verified.

    `predicted_peak` is None where the lever does not apply (`reason` says why). `how` says how the
    prediction was made, or what was applied; `manual`, for a lever `--verify` cannot apply (it needs the
    person's own code), why not and what to write. `micro_batches` is (how many, their size) for the
    micro-batch lever; `head`, for the chunked loss `--verify` applies, the `nn.Linear` whose logits it
    does not make; `parts`, for the combined lever, the levers it applies together. `applied` says what
    `--verify` applied to the real step.
    """

    kind: LeverKind
    what: str
    predicted_peak: int | None
    how: str = ""
    measured_peak: int | None = None
    measured_before: int | None = None
    manual: str | None = None
    reason: str | None = None
    micro_batches: tuple[int, int] | None = None
    head: str | None = None
    parts: tuple[LeverKind, ...] = ()
    applied: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the kind's value, the predicted and (verified) measured peaks, and the texts."""
        return {"lever": self.kind.value, "what": self.what, "predicted_peak_bytes": self.predicted_peak,
                "how": self.how, "measured_peak_bytes": self.measured_peak,
                "measured_peak_before_bytes": self.measured_before, "manual": self.manual, "reason": self.reason,
                "micro_batches": list(self.micro_batches) if self.micro_batches else None,
                "head": self.head, "parts": [k.value for k in self.parts], "applied": self.applied}

    def line(self, before: int, budget: int) -> str:
        """One line: the lever, its predicted peak against `before` and the `budget`, measured if verified.

        >>> Lever(LeverKind.FREE_GRADS, "free each .grad", 600, "on fake tensors").line(1000, 700)
        "- free each .grad: predicted peak 1000 B -> 600 B (under the peak's budget 700 B; on fake tensors)"
        >>> Lever(LeverKind.AUTOCAST, "autocast", 1_470_000, "on fake tensors").line(2**21, 1_460_000).split("(")[1]
        "still over the peak's budget 1.4 MiB, by 9.8 KiB; on fake tensors)"
        """
        if self.predicted_peak is None:
            return f"- {self.what}: not predicted ({self.reason})"
        over = self.predicted_peak - budget  # by how much, as the two may round to the same text
        against = (f"under the peak's budget {human_bytes(budget)}" if over <= 0
                   else f"still over the peak's budget {human_bytes(budget)}, by {human_bytes(over)}")
        text = (f"- {self.what}: predicted peak {human_bytes(before)} -> {human_bytes(self.predicted_peak)} "
                f"({against}; {self.how})")
        if self.measured_peak is not None:
            if self.applied:
                text += f"\n    applied by --verify: {self.applied}"
            text += (f"\n    verified: measured {human_bytes(self.measured_before or 0)} -> "
                     f"{human_bytes(self.measured_peak)} (predicted {human_bytes(self.predicted_peak)})")
        if self.manual:
            text += f"\n    {self.manual}"
        return text


@dataclass(frozen=True, slots=True)
class ChunkedLoss:
    """The chunked loss's what-if: the peak predicted, the logits' shape, the nodes taken at a chunk's size,
    whether the loss is a cross-entropy (a log-softmax or softmax between the logits and the loss), and the
    module of the op making the logits (the head, for `--verify` to apply the chunked loss to)."""

    peak: int
    logits_shape: tuple[int, ...]
    logits_bytes: int
    nodes: tuple[str, ...]
    cross_entropy: bool
    head_module: str | None = None


def _walk_up(into: dict[str, list[str]], start: list[str], depth: int, stop: str | None = None) -> list[str]:
    """The ops backward reaches from `start` within `depth` steps, not past `stop`."""
    seen, todo, found = set(start), deque((op, 0) for op in start), []
    while todo:
        node, d = todo.popleft()
        found.append(node)
        if d < depth and node != stop:
            for src in into.get(node, ()):
                if src not in seen:
                    seen.add(src)
                    todo.append((src, d + 1))
    return found


def _logits_region(graph: Graph, plan: BackwardPlan) -> tuple[str, set[str], set[str], str | None] | None:
    """The op making the logits (the largest tensor within a few ops of the loss), the ops from the loss up to it,
    among those the ones whose tensors are logits-sized (the same last dimension, at least half the bytes), and
    the module that made them: the nearest module of an op at or above it with a tensor over the vocabulary
    (`logits.view(-1, vocab)` in the loss is the model's own op; the head's matmul a few ops up is its module's)."""
    into: dict[str, list[str]] = {}
    for e in graph.edges:
        if e.kind is EdgeKind.DATA and plan.nodes[e.src].kind is NodeKind.OP:
            into.setdefault(e.dst, []).append(e.src)
    start = list(dict.fromkeys(plan.ids[op] for op, _, _, _ in plan.roots))
    near = _walk_up(into, start, 8)
    sized = [n for n in near if (t := plan.nodes[n].tensor) is not None and t.shape]
    if not sized:
        return None
    index, sizes = plan.index, plan.sizes
    head = max(sized, key=lambda n: (sizes[index[n]], index[n]))  # of equal ones, the furthest: the maker
    between = set(_walk_up(into, start, 8, stop=head))
    last, big = plan.nodes[head].tensor.shape[-1], sizes[index[head]] // 2  # type: ignore[union-attr]

    def logits_sized(n: str) -> bool:
        t = plan.nodes[n].tensor
        return t is not None and bool(t.shape) and t.shape[-1] == last and sizes[index[n]] >= big

    made = [n for n in _walk_up(into, [head], 4) if plan.nodes[n].module and logits_sized(n)]
    return head, between, {n for n in between if logits_sized(n)}, plan.nodes[made[0]].module if made else None


def chunked_loss_peak(graph: Graph, *, roots: Collection[str] | None = None, chunks: int = CHUNKS,
                      retain_graph: bool = False, forward_peak: int | None = None) -> ChunkedLoss | None:
    """The step's peak if the loss were computed in `chunks` chunks over its logits, from the replay.

    Every tensor of the logits' size made between the logits and the loss (the logits, their float copy,
    log-softmax's result, the gradients flowing back to the head) is taken at one chunk's size: a chunked
    loss (each chunk's logits made, used and dropped, recomputed in backward) keeps one chunk alive at a time.
    The gradients of the head's input and weight keep their size, and while the loss's backward runs one
    more weight gradient is alive (each chunk's, made while the sum of the earlier ones is held).
    `forward_peak` (measured or forecast): what the forward held above its end is taken as the loss's (the
    logits and log-softmax's result), one chunk of it. None: no op near the loss makes a tensor with a last
    dimension (nothing to chunk).
    """
    plan = plan_backward(graph, roots)
    found = _logits_region(graph, plan)
    if found is None:
        return None
    head, between, region, module = found
    base = EngineReplay(plan, retain_graph=retain_graph)
    steps = base.run()
    index = plan.index  # the plan's tables are by node number
    region_numbers, between_numbers, head_number = {index[n] for n in region}, {index[n] for n in between}, index[head]
    sizes = [s // chunks if n in region_numbers else s for n, s in enumerate(plan.sizes)]
    storage = dict(plan.storage_bytes)
    logits = plan.sizes[head_number]
    for key, savers in plan.savers.items():
        if storage[key] >= logits // 2 and all(s in between_numbers and s != head_number for s in savers):
            storage[key] //= chunks
    for key, output in plan.outputs.items():
        op = plan.output_op.get(output)
        if op in region:
            storage[key] //= chunks
    roots_scaled = [(op, nr, size // chunks if op in region_numbers else size, item)
                    for op, nr, size, item in plan.roots]
    changed = dataclasses.replace(plan, sizes=sizes, storage_bytes=storage, roots=roots_scaled)
    after = EngineReplay(changed, retain_graph=retain_graph).run()
    # Each chunk's backward makes the head's whole weight gradient while the sum of the earlier ones is held.
    last = tensor.shape[-1] if (tensor := plan.nodes[head].tensor) is not None and tensor.shape else 0
    extra = max((plan.sizes[t] for t, _, _ in plan.sends[head_number] or ()
                 if (w := plan.node_at[t].tensor) is not None and last in w.shape and t not in region_numbers),
                default=0)
    peak = max(s.peak + (extra if s.node in between else 0) for s in after)
    if forward_peak is not None:  # what the forward held above its end: taken as the loss's, one chunk of it
        peak = max(peak, after[0].after + max(0, forward_peak - steps[0].after) // chunks)
    entropy = any(plan.nodes[n].name in _SOFTMAX for n in between)
    return ChunkedLoss(peak, tensor.shape if tensor is not None else (), logits,
                       tuple(sorted(region, key=plan.index.__getitem__)), entropy, module)
