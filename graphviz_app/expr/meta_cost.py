"""What a module call costs, measured on `meta`: bytes it keeps, its largest tensor, multiply-adds.

A program's modules have twins on the `meta` device (see `modules.py`); a
call is run on the twin first, under `CallCost`, so a call that breaks the
limits is refused before it allocates anything. Meta kernels run in Python
and cost about 0.1 ms an op, so a 100-layer `nn.TransformerEncoder` would
take most of a second to size. Its layers are copies of one layer: `size_once`
marks a twin so that, within one measurement, a second call of the same
layer (or of a copy of it) on inputs of the same shapes reuses the first
call's cost and output shapes instead of running it again.
"""

from __future__ import annotations

import contextvars
import itertools
from collections.abc import Callable
from typing import Any

import torch
from torch.utils.flop_counter import flop_registry

from ..tracing.torch_internals import TorchDispatchMode
from .guards import Budget

__all__ = ["CallCost", "size_once"]

_active: contextvars.ContextVar[CallCost | None] = contextvars.ContextVar("graphviz_app_call_cost", default=None)
_keys = itertools.count()
_UNREPEATABLE = object()  # a call whose inputs or outputs cannot be rebuilt from shapes alone


class CallCost(TorchDispatchMode):
    """Counts what a forward makes: the largest tensor, all bytes and the flops.

    With `budget`, it stops a real forward as soon as the count breaks the
    limits (for a call torch could not size on meta first). Flops are counted
    with torch's own table (`torch.utils.flop_counter`), as `FlopCounterMode`
    does, without its per-module bookkeeping.
    """

    def __init__(self, budget: Budget | None = None, what: str = "") -> None:
        super().__init__()
        self.largest = 0
        self.nbytes = 0
        self.flops = 0
        self.budget = budget
        self.what = what
        self._memo: dict[tuple[Any, ...], Any] = {}
        self._token: contextvars.Token[CallCost | None] | None = None

    def __enter__(self) -> CallCost:
        self._token = _active.set(self)
        return super().__enter__()

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        if self._token is not None:
            _active.reset(self._token)
            self._token = None

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor):
                self.largest = max(self.largest, t.numel())
                self.nbytes += t.numel() * t.element_size()
                if self.budget is not None:
                    self.budget.before(f"{self.what} (on the way)", t.numel(), self.nbytes)
        count = flop_registry.get(func.overloadpacket)
        if count is not None:
            self.flops += count(*args, **kwargs, out_val=out)
        return out

    def _counts(self) -> tuple[int, int, int]:
        return self.largest, self.nbytes, self.flops


class _SizedOnce:
    """A meta twin's `forward`: measured once per measurement and input shapes, then reused."""

    __slots__ = ("module", "key")

    def __init__(self, module: torch.nn.Module, key: int) -> None:
        self.module, self.key = module, key

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        forward = type(self.module).forward.__get__(self.module)
        cost = _active.get()
        if cost is None:
            return forward(*args, **kwargs)
        inputs = _signature((args, kwargs))
        if inputs is _UNREPEATABLE:
            return forward(*args, **kwargs)
        memo_key = (self.key, inputs)
        known = cost._memo.get(memo_key)
        if known is not None and known[1] is not _UNREPEATABLE:
            (largest, nbytes, flops), shapes = known
            counts = cost._counts()
            out = _rebuild(shapes)  # its empty tensors pass through the mode: not the forward's cost
            cost.largest, cost.nbytes, cost.flops = max(counts[0], largest), counts[1] + nbytes, counts[2] + flops
            return out
        largest0, nbytes0, flops0 = cost._counts()
        cost.largest = 0
        out = forward(*args, **kwargs)
        largest = cost.largest
        cost.largest = max(largest, largest0)
        cost._memo[memo_key] = ((largest, cost.nbytes - nbytes0, cost.flops - flops0), _signature(out))
        return out


def size_once(meta: torch.nn.Module) -> None:
    """Mark `meta` (a twin on `meta`) so repeated calls are measured once; its copies inherit the mark.

    `copy.deepcopy` (how `nn.TransformerEncoder` makes its layers) copies the
    mark with the module, so every copy shares the original's key.
    """
    if not isinstance(meta.__dict__.get("forward"), _SizedOnce):
        meta.forward = _SizedOnce(meta, next(_keys))


def _signature(value: Any) -> Any:
    """A hashable description of `value` from which an equal-shaped copy can be made, or _UNREPEATABLE."""
    if isinstance(value, torch.Tensor):
        if type(value) is not torch.Tensor or value.device.type != "meta":
            return _UNREPEATABLE
        return ("tensor", tuple(value.shape), value.stride(), value.dtype, value.requires_grad)
    if value is None or type(value) in (bool, int, float, str):
        return ("value", value)
    if type(value) in (tuple, list):
        parts = tuple(_signature(v) for v in value)
        return _UNREPEATABLE if _UNREPEATABLE in parts else (type(value).__name__, parts)
    if type(value) is dict:
        parts = tuple((k, _signature(v)) for k, v in value.items())
        return _UNREPEATABLE if any(p is _UNREPEATABLE for _, p in parts) else ("dict", parts)
    return _UNREPEATABLE


_REBUILD: dict[str, Callable[[Any], Any]] = {
    "tensor": lambda s: torch.empty_strided(s[1], s[2], dtype=s[3], device="meta", requires_grad=s[4]),
    "value": lambda s: s[1],
    "tuple": lambda s: tuple(_rebuild(p) for p in s[1]),
    "list": lambda s: [_rebuild(p) for p in s[1]],
    "dict": lambda s: {k: _rebuild(p) for k, p in s[1]},
}


def _rebuild(shapes: Any) -> Any:
    return _REBUILD[shapes[0]](shapes)
