"""nn modules in programs: built after their parameters are counted on `meta`, called under the budget."""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..model import human_bytes
from .allowlist import MODULE_ATTRIBUTES, NN_MODULES
from .guards import Budget, Refused, check_device, to_meta
from .meta_cost import CallCost, size_once
from .recurrent import precheck_recurrent

__all__ = [
    "ProgramModule",
    "MAX_MODULE_CALLS",
    "MAX_MODULE_NESTING",
    "construct",
    "call_module",
    "index_module",
    "module_attribute",
    "no_attribute",
]

# One call of a module runs the forward of every module inside it; a
# container holding the same module many times (or containers of containers
# of it) runs it each time, so the count is taken with repeats.
MAX_MODULE_CALLS = 10_000
MAX_MODULE_NESTING = 16  # each level is a Python call frame in forward
_MAX_RNN_LAYERS = 64
_Operand = tuple[str, Any]


@dataclass(frozen=True, eq=False)
class ProgramModule:
    """A module as a program holds it: the real one, its twin on `meta`, and its size.

    Attributes:
        module: The module, on the program's device.
        meta: The same structure on the `meta` device: runs forward for
            shapes and costs without memory.
        calls: Module forwards one call runs (itself included), with repeats.
        nesting: Levels of modules inside it (1 for a module without children).
        children: The program's modules a container holds, in order.
    """

    module: torch.nn.Module
    meta: torch.nn.Module
    calls: int
    nesting: int
    children: tuple[ProgramModule, ...] = ()

    @property
    def type_name(self) -> str:
        return type(self.module).__name__


def construct(what: str, name: str, args: Sequence[_Operand], kwargs: dict[str, Any], defaults: Any) -> ProgramModule:
    """`nn.<name>(*args, **kwargs)`: refused before allocating when its parameters break the budget."""
    cls = getattr(torch.nn, name)  # name is from the fixed allow-list
    kind = NN_MODULES[name]
    values = [v for _, v in args]
    if kind == "container" and len(values) == 1 and isinstance(values[0], (list, tuple)):
        values = list(values[0])  # nn.Sequential([a, b]) as nn.ModuleList([a, b])
    held = [v for v in [*values, *kwargs.values()] if isinstance(v, ProgramModule)]
    if kind in ("layer", "plain") and held:
        raise Refused(f"{what} takes sizes and options, not a module ({held[0].type_name})", kind="input")
    if kind == "container" and not all(isinstance(v, ProgramModule) for v in values):
        bad = next(v for v in values if not isinstance(v, ProgramModule))
        raise Refused(f"{what} holds modules only, found a {type(bad).__name__}: "
                      "build each layer first, e.g. nn.Sequential(nn.Linear(4, 8), nn.ReLU())", kind="input")
    if any(isinstance(v, torch.Tensor) for v in [*values, *kwargs.values()]):
        # Embedding's 8th argument (_weight) would make a program tensor its parameter.
        raise Refused(f"{what} takes sizes and options, not tensors: its parameters are made for it",
                      kind="input")
    if "device" in kwargs:
        check_device(kwargs["device"])
    if kind == "layer":
        kwargs = _layer_defaults(cls, name, values, kwargs, defaults, what)
    calls, nesting = _size(what, kind, cls, values, kwargs, held)
    meta = _build(what, cls, kind, values, kwargs, meta=True)
    size_once(meta)  # copies of it (nn.TransformerEncoder's layers) are sized once per call
    if kind in ("layer", "plain"):
        calls = sum(1 for _ in meta.modules())
    _check_not_in_place(what, name, meta)
    new = _new_tensors(meta, [h.meta for h in held])
    if defaults.budget is not None:
        _charge_parameters(what, new, defaults.budget)
    module = _build(what, cls, kind, values, kwargs, meta=False)
    return ProgramModule(module, meta, calls, nesting, tuple(values) if kind == "container" else ())


def _layer_defaults(cls: type, name: str, values: list[Any], kwargs: dict[str, Any],
                    defaults: Any, what: str) -> dict[str, Any]:
    kwargs = dict(kwargs)
    if defaults.device is not None and "device" not in kwargs:
        kwargs["device"] = defaults.device
    if defaults.dtype is not None and "dtype" not in kwargs:
        kwargs["dtype"] = defaults.dtype
    if name in ("LSTM", "GRU"):
        # LSTM/GRU take (*args, **kwargs): num_layers is the third argument.
        layers = kwargs.get("num_layers", values[2] if len(values) > 2 else 1)
        if isinstance(layers, int) and layers > _MAX_RNN_LAYERS:
            raise Refused(f"{what} asks for {layers:,} stacked layers; at most {_MAX_RNN_LAYERS}", kind="limit")
    return kwargs


def _bound(cls: type, values: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    try:
        return dict(inspect.signature(cls).bind_partial(*values, **kwargs).arguments)
    except (TypeError, ValueError):
        return {}  # torch refuses the call itself, with its own message


def _size(what: str, kind: str, cls: type, values: list[Any], kwargs: dict[str, Any],
          held: list[ProgramModule]) -> tuple[int, int]:
    """(forwards per call, nesting), judged before anything is built."""
    if kind == "copies":
        bound = _bound(cls, values, kwargs)
        layer, count = bound.get("encoder_layer"), bound.get("num_layers")
        if not isinstance(layer, ProgramModule) or type(count) is not int or count < 0:
            raise Refused(f"{what} needs a layer module and a whole number of layers, e.g. "
                          "nn.TransformerEncoder(layer, num_layers=6) with layer = nn.TransformerEncoderLayer(...)",
                          kind="input")
        norm = bound.get("norm")
        calls = 1 + min(count, 2**40) * layer.calls + (norm.calls if isinstance(norm, ProgramModule) else 0)
        nesting = 2 + layer.nesting
    elif kind == "container":
        calls = 1 + sum(h.calls for h in held)
        nesting = 1 + max((h.nesting for h in held), default=0)
    else:
        calls, nesting = 0, 1  # counted once built on meta (a layer's own submodules)
    if calls > MAX_MODULE_CALLS:
        raise Refused(f"{what} would run {calls:,} module forwards per call (a module held more than once "
                      f"counts each time); the limit is {MAX_MODULE_CALLS:,}: use fewer or smaller layers",
                      kind="limit")
    if nesting > MAX_MODULE_NESTING:
        raise Refused(f"{what} nests modules {nesting} levels deep; the limit is {MAX_MODULE_NESTING}", kind="limit")
    return calls, nesting


def _build(
    what: str, cls: type, kind: str, values: list[Any], kwargs: dict[str, Any], *, meta: bool
) -> torch.nn.Module:
    def unwrap(v: Any) -> Any:
        return (v.meta if meta else v.module) if isinstance(v, ProgramModule) else v

    args = [unwrap(v) for v in values]
    kw = {k: unwrap(v) for k, v in kwargs.items()}
    if kind == "layer" and meta:
        kw["device"] = "meta"
    if kind == "container" and cls is torch.nn.ModuleList:
        args = [args]
    try:
        with warnings.catch_warnings():
            # TransformerEncoder warns that its inference fast path is off: beside the point here.
            warnings.simplefilter("ignore")
            return cls(*args, **kw)
    except Refused:
        raise
    except Exception as e:  # noqa: BLE001 - explained for people
        from .translate import explain

        message, kind_ = explain(e, what, [(repr(a)[:20], a) for a in args])
        raise Refused(message, kind_) from e


def _check_not_in_place(what: str, name: str, meta: torch.nn.Module) -> None:
    if getattr(meta, "inplace", False):
        why, fix = "inplace=True", "leave inplace at its default, False"
    elif name == "Embedding" and getattr(meta, "max_norm", None) is not None:
        why, fix = "max_norm renormalizes rows of the weight in place", "leave max_norm at its default, None"
    else:
        return
    raise Refused(f"{what} would change tensors in place ({why}); programs never change tensors in place, "
                  f"so the drawn graph stays whole: {fix}", kind="refused")


def _new_tensors(meta: torch.nn.Module, held: list[torch.nn.Module]) -> list[torch.Tensor]:
    """Parameters and buffers of `meta` that no module it was given already holds."""
    old = {id(t) for m in held for t in (*m.parameters(), *m.buffers())}
    seen: set[int] = set()
    new = []
    for t in (*meta.parameters(), *meta.buffers()):
        if id(t) not in old and id(t) not in seen:
            seen.add(id(t))
            new.append(t)
    return new


def _charge_parameters(what: str, tensors: list[torch.Tensor], budget: Budget) -> None:
    total = 0
    for t in tensors:
        nbytes = t.numel() * t.element_size()
        budget.before(f"{what} (a parameter of shape {tuple(t.shape)})", t.numel(), nbytes)
        total += nbytes
    budget.before(f"{what} (its {len(tensors)} parameter tensors, {human_bytes(total)})", 0, total)
    budget.used += total


def call_module(label: str, pm: ProgramModule, args: Sequence[_Operand], kwargs: dict[str, Any],
                budget: Budget | None) -> Any:
    """`label(*args, **kwargs)`: its forward sized on `meta` first, then run for real."""
    what = f"{label}(...)"
    values = [v for _, v in args]
    if any(isinstance(v, ProgramModule) for v in [*values, *kwargs.values()]):
        raise Refused(f"{what}: a module takes tensors, not another module", kind="input")
    if budget is None:
        sized = True
    else:
        recurrent = precheck_recurrent(what, pm.module, pm.meta, values, kwargs, budget)
        sized = _precheck_call(what, pm, values, kwargs, budget) if recurrent is None else recurrent
    try:
        if sized:
            return pm.module(*values, **kwargs)
        with CallCost(budget, what) as guard:
            result = pm.module(*values, **kwargs)
        budget.used += guard.nbytes  # type: ignore[union-attr]
        return result
    except Refused:
        raise
    except Exception as e:  # noqa: BLE001 - explained for people
        from .translate import explain

        message, kind = explain(e, what, list(args))
        raise Refused(message, kind) from e


def _precheck_call(what: str, pm: ProgramModule, values: list[Any], kwargs: dict[str, Any], budget: Budget) -> bool:
    """Refuse a call whose forward breaks the limits on meta; False if meta could not run it."""
    sizes = CallCost()
    try:
        with torch.no_grad(), sizes:
            pm.meta(*[to_meta(v) for v in values], **{k: to_meta(v) for k, v in kwargs.items()})
    except Exception:  # noqa: BLE001 - the real call raises it with the program's values
        return False  # run for real under a guard that stops at the limits
    if sizes.largest > budget.limits.max_tensor_elements:
        budget.before(f"{what} (a tensor on the way)", sizes.largest, 0)
    budget.before(f"{what} (every tensor its forward keeps for backward)", 0, sizes.nbytes)
    multiply_adds = sizes.flops // 2
    limit = budget.limits.max_multiply_adds
    if multiply_adds > limit:
        raise Refused(
            f"{what} would take about {multiply_adds:,} multiply-adds; the limit is {limit:,} per call "
            "(Limits.max_multiply_adds), as one call cannot be stopped once started: use smaller inputs or layers"
        )
    budget.used += sizes.nbytes
    return True


def index_module(label: str, pm: ProgramModule, index: Any) -> ProgramModule:
    """`seq[i]` or `seq[a:b]` of an nn.Sequential or nn.ModuleList."""
    if not pm.children and not isinstance(pm.module, (torch.nn.Sequential, torch.nn.ModuleList)):
        raise Refused(f"{label}[...]: only nn.Sequential and nn.ModuleList can be indexed, not {pm.type_name}",
                      kind="input")
    if type(index) is int:
        if not -len(pm.children) <= index < len(pm.children):
            raise Refused(f"{label}[{index}] is out of range: it holds {len(pm.children)} modules", kind="input")
        return pm.children[index]
    if isinstance(index, slice) and all(p is None or type(p) is int for p in (index.start, index.stop, index.step)):
        if index.step == 0:
            raise Refused(f"{label}[...]: the slice step must not be zero", kind="input")
        kept = pm.children[index]
        cls = type(pm.module)
        real = cls(*[c.module for c in kept]) if cls is torch.nn.Sequential else cls([c.module for c in kept])
        meta = cls(*[c.meta for c in kept]) if cls is torch.nn.Sequential else cls([c.meta for c in kept])
        return ProgramModule(real, meta, 1 + sum(c.calls for c in kept),
                             1 + max((c.nesting for c in kept), default=0), kept)
    raise Refused(f"{label}[...] needs a whole number or a slice, found {type(index).__name__}", kind="input")


def module_attribute(label: str, pm: ProgramModule, attr: str) -> Any:
    """`lin.weight`, `lin.bias`: the only attributes of a module a program can read."""
    if attr in MODULE_ATTRIBUTES:
        value = getattr(pm.module, attr, _MISSING)  # attr is from the fixed allow-list
        if value is None or isinstance(value, torch.Tensor):
            return value
        raise Refused(f"{label}.{attr}: a {pm.type_name} has no {attr}", kind="input")
    raise Refused(no_attribute(label, pm, attr), kind="refused")


_MISSING = object()


def no_attribute(label: str, pm: ProgramModule, attr: str) -> str:
    allowed = " and ".join(f"{label}.{a}" for a in sorted(MODULE_ATTRIBUTES))
    return (f"{label}.{attr}: a module's only readable attributes are {allowed}; "
            f"call it as {label}(x) (modules run in training mode, and their hooks, buffers, state and "
            "devices are out of reach)")
