"""One captured call as a function of its differentiated inputs and parameters, re-run in float64 copies.

Every evaluation starts from the call's own inputs, buffers and random state: buffers a forward
mutates (BatchNorm's running statistics) are fresh copies each time, and dropout draws the same
masks, so finite differences see one function.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from ...analysis.model_check import UnitKind
from .capture import (
    DATA,
    NO_GRAD,
    Call,
    Site,
    caller_site,
    cuda_devices,
    data_property,
    map_tensors,
    set_attribute,
    tensors_in,
)

__all__ = ["Budget", "BudgetSpent", "Unit", "suppressed"]


class BudgetSpent(Exception):
    """The evaluations or seconds the caller allowed are used up."""


class Budget:
    """Counts evaluations against `max_evaluations` and a deadline."""

    def __init__(self, max_evaluations: int | None, seconds: float | None) -> None:
        self.max_evaluations = max_evaluations
        self.deadline = None if seconds is None else time.monotonic() + seconds
        self.used = 0
        self.spent = False

    def tick(self, count: int = 1) -> None:
        """Counts `count` evaluations; raises BudgetSpent once over the budget."""
        self.used += count
        over = self.max_evaluations is not None and self.used > self.max_evaluations
        if over or (self.deadline is not None and time.monotonic() > self.deadline):
            self.spent = True
            raise BudgetSpent


@dataclass(frozen=True, slots=True)
class DiffInput:
    """One differentiated input or parameter of a unit, in float64."""

    name: str
    value: torch.Tensor
    moved: torch.Tensor | None = None  # elements finite differences move (None: all); see `_by_design`


class Unit:
    """`unit(values)` re-runs `call` with its differentiated inputs set to `values`; floating outputs, flat."""

    def __init__(self, call: Call, budget: Budget, dtype: torch.dtype = torch.float64) -> None:
        self.call = call
        self.budget = budget
        self.dtype = dtype  # float64; float32 when float64 copies cannot run (see run.check)
        self.notes: list[str] = []
        self.flat = [_to(t, dtype) for t in tensors_in((call.args, call.kwargs))]
        names = _input_names(call)
        self.inputs: list[DiffInput] = []
        self.positions: list[int] = []  # flat input position of each differentiated input, -1 for parameters
        ignored = []
        for k, (t, wanted) in enumerate(zip(self.flat, call.grad_inputs, strict=True)):
            if t.is_floating_point() and wanted:
                self.inputs.append(DiffInput(f"{names[k]} input", t))
                self.positions.append(k)
            elif t.is_floating_point():
                ignored.append(names[k])
        self.params: dict[str, torch.Tensor] = {}
        self.param_slots: dict[str, int] = {}
        if call.kind == UnitKind.MODULE:
            fixed = _by_design(call.target)
            for name, p in call.target.named_parameters():
                value = _to(p.detach(), dtype)
                if p.requires_grad and value.is_floating_point():
                    self.param_slots[name] = len(self.inputs)
                    moved, why = fixed.get(name, (None, None))
                    self.inputs.append(DiffInput(f"parameter {name}", value, moved))
                    self.positions.append(-1)
                    if why is not None:
                        self.notes.append(why)
                self.params[name] = value
        self.buffers = {k: _to(b, dtype) for k, b in call.buffers.items()}
        if ignored:
            self.notes.append(f"input(s) {', '.join(ignored)} did not require grad in the step: not differentiated")
        lower = sorted({str(t.dtype).replace("torch.", "") for t in tensors_in((call.args, call.kwargs))
                        if t.is_floating_point() and t.dtype != dtype})
        if lower and dtype == torch.float64:
            self.notes.append(f"checked in float64 copies (the step ran in {', '.join(lower)})")

    def __call__(self, values: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        self.budget.tick()
        flat = [t.clone() for t in self.flat]
        for value, pos in zip(values, self.positions, strict=True):
            if pos >= 0:
                flat[pos] = value.clone()  # in-place ops in the forward act on a copy, never on the leaf
        it = iter(flat)
        args, kwargs = map_tensors((self.call.args, self.call.kwargs), lambda _: next(it))
        cuda = self.call.cuda_rng
        with torch.random.fork_rng(devices=cuda_devices() if cuda else []), torch.enable_grad():
            torch.set_rng_state(self.call.rng)
            if cuda:  # dropout on a GPU draws from the device's generator
                torch.cuda.set_rng_state_all(cuda)
            if self.call.kind == UnitKind.MODULE:
                params = dict(self.params)
                for name, slot in self.param_slots.items():
                    params[name] = values[slot]
                buffers = {k: b.clone() for k, b in self.buffers.items()}
                out = torch.func.functional_call(self.call.target, (params, buffers), tuple(args), kwargs)
            else:
                out = self.call.target.apply(*args, **kwargs)
        return [t for t in tensors_in(out) if t.is_floating_point()]


def _by_design(module: torch.nn.Module) -> dict[str, tuple[torch.Tensor, str]]:
    """Parameter elements whose gradient is zero by design, by parameter name: what not to move.

    `nn.Embedding(padding_idx=k)` gives row k no gradient although the forward reads it.
    """
    found = {}
    for prefix, m in module.named_modules():
        if isinstance(m, (torch.nn.Embedding, torch.nn.EmbeddingBag)) and m.padding_idx is not None:
            moved = torch.ones(m.weight.shape, dtype=torch.bool)
            moved[m.padding_idx] = False
            name = f"{prefix}.weight" if prefix else "weight"
            found[name] = (moved, f"row {m.padding_idx} of {name} is not moved: nn.Embedding's padding_idx gives it "
                                  "no gradient by design")
    return found


def _to(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return t.detach().to(dtype) if t.is_floating_point() else t.detach()


def _input_names(call: Call) -> list[str]:
    """A name per flat input tensor: the forward's parameter name (`query`), `x[1]` inside a tuple."""
    target = call.target.forward
    try:
        params = list(inspect.signature(target).parameters)
    except (TypeError, ValueError):
        params = []
    if call.kind == UnitKind.FUNCTION and params:
        separate = getattr(call.target, "setup_context", None) is not torch.autograd.Function.setup_context
        params = params if separate else params[1:]  # forward(ctx, ...) unless a setup_context takes ctx
    names: list[str] = []
    for j, value in enumerate(call.args):
        base = params[j] if j < len(params) and not params[j].startswith("*") else f"argument {j}"
        found = tensors_in(value)
        names += [base] if len(found) == 1 else [f"{base}[{k}]" for k in range(len(found))]
    for key, value in call.kwargs.items():
        found = tensors_in(value)
        names += [key] if len(found) == 1 else [f"{key}[{k}]" for k in range(len(found))]
    return names


@contextmanager
def suppressed(site: Site) -> Iterator[None]:
    """While inside, the hook, `.detach()`, `torch.no_grad()` or `.data` change made at `site` does nothing
    (to test whether it is the culprit): `.data` there reads a detached clone, so an in-place change
    through it no longer reaches the tensor autograd saved."""
    owner, name, replacement = _neutral(site)
    had, original = name in owner.__dict__, owner.__dict__.get(name)
    set_attribute(owner, name, replacement)
    try:
        yield
    finally:
        if had:
            set_attribute(owner, name, original)
        else:  # inherited (from torch's C base class): the class's own entry goes, the inherited one shows again
            delattr(owner, name)


def _neutral(site: Site) -> tuple[Any, str, Any]:
    """(class, attribute, replacement) that makes the change at `site` do nothing and leaves every other call
    as it was."""
    at = (site.file, site.line)
    if site.kind == UnitKind.DATA:
        def data(tensor: torch.Tensor) -> torch.Tensor:
            value = DATA.__get__(tensor)
            return value.clone() if caller_site(1) == at else value

        return torch.Tensor, "data", data_property(data)
    if site.name == NO_GRAD:
        original_enter = torch.no_grad.__enter__

        def enter(self: torch.no_grad) -> None:
            if caller_site(1) == at:
                self.prev = torch.is_grad_enabled()  # __exit__ restores it; grad stays on inside
                return
            original_enter(self)

        return torch.no_grad, "__enter__", enter
    if site.kind == UnitKind.HOOK:
        original_hook = torch.Tensor.register_hook

        def register_hook(tensor: torch.Tensor, hook: Any) -> Any:
            if caller_site(1) == at:
                return None
            return original_hook(tensor, hook)

        return torch.Tensor, "register_hook", register_hook
    original_detach = torch.Tensor.detach

    def detach(tensor: torch.Tensor) -> torch.Tensor:
        if caller_site(1) == at:
            return tensor.view_as(tensor)  # keeps the gradient that .detach() cut
        return original_detach(tensor)

    return torch.Tensor, "detach", detach
