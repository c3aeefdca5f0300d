"""Find the parts of fn that run under `torch.no_grad()` or `torch.inference_mode()` on differentiated tensors."""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from gradcheck.report import Blame, Check, PairReport

# Finite differences re-run the whole of fn and see through such a block; autograd does
# not: its Jacobian leaves that part out. A pair that disagrees for this reason is
# neither side's mistake, and says so (`Blame.DETACHED`), instead of blaming the backward.
__all__ = ["detached_calls", "settle_detached", "detached_note"]

# Blames a detached block explains: the backward or the derivation "wrong", or all sides apart.
_EXPLAINED = (Blame.AUTOGRAD, Blame.SHARED, Blame.UNCLEAR, Blame.EXPECTED)
_SHOWN = 5


class _Watch(TorchFunctionMode):
    """Finds values computed with grad mode off from tensors that require grad and used later with it on.

    A result made under no_grad from a differentiated tensor is remembered with the call that made
    it (and so is anything computed from it still under no_grad); when such a value, still not
    requiring grad, is used by a call with grad mode on, it feeds the output past autograd. The
    inside of a custom autograd.Function's forward also runs with grad mode off, but its results
    come out requiring grad (the Function's node): they are not reported.
    """

    def __init__(self) -> None:
        super().__init__()
        self.made: dict[int, tuple[weakref.ref[torch.Tensor], str]] = {}
        self.calls: list[str] = []

    def _origin(self, t: torch.Tensor) -> str | None:
        found = self.made.get(id(t))
        return found[1] if found is not None and found[0]() is t else None

    def __torch_function__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        tensors = _tensors((args, kwargs))
        if torch.is_grad_enabled():
            for t in tensors:
                origin = None if t.requires_grad else self._origin(t)
                if origin is not None and origin not in self.calls:
                    self.calls.append(origin)
            return result
        sources = [t.requires_grad or self._origin(t) is not None for t in tensors]
        if any(sources):
            origin = next((self._origin(t) for t in tensors if self._origin(t) is not None), None)
            name = origin or getattr(func, "__name__", None) or str(func)
            for r in _tensors(result):
                self.made[id(r)] = (weakref.ref(r), name)
        return result


def _tensors(value: Any) -> list[torch.Tensor]:
    """The tensors in a call's arguments or result: nested tuples, lists and dicts (iterative)."""
    found, todo = [], [value]
    while todo:
        item = todo.pop()
        if isinstance(item, torch.Tensor):
            found.append(item)
        elif isinstance(item, (tuple, list)):
            todo.extend(item)
        elif isinstance(item, dict):
            todo.extend(item.values())
    return found


def detached_calls(fn: Callable[..., Any], leaves: Sequence[Any]) -> list[str]:
    """The torch functions fn calls under no_grad / inference_mode on tensors that require grad.

    Runs fn once more on `leaves` (the autograd copies, differentiated ones requiring grad).
    """
    watch = _Watch()
    with torch.enable_grad(), watch:
        fn(*leaves)
    return watch.calls


def detached_note(calls: Sequence[str]) -> str:
    """What a person should be told when fn detaches part of its computation."""
    shown = ", ".join(calls[:_SHOWN]) + (f" and {len(calls) - _SHOWN} more" if len(calls) > _SHOWN else "")
    return (
        f"fn computes part of its result from the differentiated inputs under torch.no_grad() or "
        f"torch.inference_mode() ({shown}): finite differences re-run fn and include that part, autograd "
        "does not, so they differ without either being wrong. To check the gradient, move the computation out "
        "of the block; to check the rest, pass what the block computes to fn as an input that is not differentiated."
    )


def settle_detached(
    fn: Callable[..., Any], leaves: Sequence[Any], pairs: list[PairReport], notes: list[str]
) -> list[PairReport]:
    """The pairs, each failing reverse-mode one re-blamed DETACHED when fn detaches part of its computation.

    fn is run once more only when some pair failed in a way a detached block explains.
    """
    failing = [p for p in pairs if not p.passed and p.blame in _EXPLAINED and p.check == Check.REV]
    if not failing:
        return pairs
    calls = detached_calls(fn, leaves)
    if not calls:
        return pairs
    notes.append(detached_note(calls))
    ids = {id(p) for p in failing}
    return [dataclasses.replace(p, blame=Blame.DETACHED) if id(p) in ids else p for p in pairs]
