"""What a lever changes in a step (`Changes`), applied to the model (`changed`), predicted allocating nothing
(`predict_changes`) and measured on the real step (`measure_changes`)."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import torch

from ...errors import ChunkedLossError
from ...model import human_bytes
from .checkpointing import checkpointed
from .chunked_loss import chunked_head
from .forecast import step_variant
from .levers import accumulated_peak, policy_of, shadow_peak, step_peak
from .step import Step

__all__ = ["Changes", "changed", "predict_changes", "measure_changes"]


@dataclasses.dataclass(frozen=True)
class Changes:
    """What a lever (or several, or a checkpoint plan with them) changes in a step: `modules` checkpointed,
    each `.grad` freed once accumulated (`free`), the forward under bfloat16 autocast, the loss over `head`'s
    logits computed in chunks, `micro` = (how many micro-batches, their size) with gradient accumulation."""

    modules: tuple[str, ...] = ()
    free: bool = False
    autocast: bool = False
    head: str | None = None
    micro: tuple[int, int] | None = None

    def with_(self, other: Changes) -> Changes:
        """Both changes at once."""
        return Changes(self.modules or other.modules, self.free or other.free, self.autocast or other.autocast,
                       self.head or other.head, self.micro or other.micro)


@contextlib.contextmanager
def changed(model: torch.nn.Module, changes: Changes) -> Iterator[None]:
    """Inside the block, `model` runs with `changes.modules` checkpointed and its loss chunked over `changes.head`;
    on the way out, a chunked loss that never ran (the logits did not reach F.cross_entropy) raises."""
    with contextlib.ExitStack() as stack:
        if changes.modules:
            stack.enter_context(checkpointed(model, changes.modules))
        calls = stack.enter_context(chunked_head(model, changes.head)) if changes.head is not None else [1]
        yield
    if not calls or not all(calls):
        raise ChunkedLossError(f"the logits of {changes.head!r} never reached F.cross_entropy: the step's loss is "
                               "not a cross-entropy over them, so there is nothing to compute in chunks")


def _wrap(changes: Changes) -> Callable[[torch.nn.Module], contextlib.AbstractContextManager[Any]] | None:
    if not changes.modules and changes.head is None:
        return None
    return lambda model: changed(model, changes)


def predict_changes(step: Step, changes: Changes) -> tuple[int, str]:
    """The peak of `step` with `changes`, forecast allocating nothing (`shadow_peak`), and how it was made up.

    Micro-batches: the larger of the first micro-step's peak and, for the next ones, every `.grad` plus the
    micro-step's peak with each incoming gradient freed once added (torch adds it into `.grad` in place)."""
    if changes.autocast:
        step = dataclasses.replace(step, autocast=torch.bfloat16, autocast_policy=policy_of(step))
    wrap = _wrap(changes)
    if changes.micro is None:
        peak, grads = shadow_peak(step, free=changes.free, wrap=wrap)
        return peak, f"{human_bytes(grads)} of .grad, each dropped once accumulated" if changes.free else ""
    k, micro = changes.micro
    micro_step = step_variant(step, batch=micro)
    first, _ = shadow_peak(micro_step, wrap=wrap)
    rest, grads = shadow_peak(micro_step, free=True, wrap=wrap)
    return max(first, grads + rest), (f"{k} micro-batches of {micro}: the larger of the first one's peak "
                                      f"{human_bytes(first)} and, for the next, every .grad {human_bytes(grads)} + "
                                      f"{human_bytes(rest)}")


def measure_changes(step: Step, changes: Changes) -> int:
    """The peak of `step` run for real with `changes` (the micro-batches run one after another, `.grad`
    accumulated, under one counter)."""
    if changes.autocast:
        step = dataclasses.replace(step, autocast=torch.bfloat16)
    wrap = _wrap(changes)
    if changes.micro is not None:
        k, micro = changes.micro
        return accumulated_peak(step_variant(step, batch=micro), k, wrap=wrap)
    with wrap(step.model) if wrap is not None else contextlib.nullcontext():
        return step_peak(step, free=changes.free)[0]
