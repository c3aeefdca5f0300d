"""Calling allow-listed functions and methods, with the checks around each call."""

from __future__ import annotations

import builtins
import inspect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from . import custom, modules
from .allowlist import CUSTOM_FUNCTIONS, F_FUNCTIONS, NAMESPACES, NN_MODULES, TENSOR_METHODS, TORCH_FUNCTIONS
from .argchecks import check_arguments
from .autograd_grad import call_grad
from .costs import operation_cost
from .guards import (
    MAX_SEQUENCE,
    Budget,
    Refused,
    broadcast_numel,
    check_device,
    check_int,
    check_sequence_length,
    meta_run,
    tensors_in,
)
from .intdiv import INT_DIVISIONS, check_integer_division, division_operands
from .shapes import constructor_is_floating, constructor_numel, op_numel
from .translate import Operand, explain

__all__ = [
    "Namespace",
    "Defaults",
    "namespace_attribute",
    "call_function",
    "call_method",
    "call_builtin",
    "admit",
    "precheck",
    "check_no_namespaces",
]

_MAX_CHUNKS = 10_000
_MAX_DIMS = 64
_PLAIN = (torch.Tensor, float, complex, str, bool, torch.dtype, torch.device)


@dataclass(frozen=True, slots=True)
class Namespace:
    """`torch`, `F`, `custom`, `torch.nn`, ... as a program sees them."""

    path: str


@dataclass(frozen=True, slots=True)
class Defaults:
    """What constructors get when they name no device/dtype; budget None = unchecked."""

    device: str | None
    dtype: torch.dtype | None
    budget: Budget | None


def namespace_attribute(ns: Namespace, attr: str) -> Any:
    """`torch.float32`, `torch.nn`, ... (functions are only reachable by calling them)."""
    path = "F" if ns.path in ("torch.nn.functional", "nn.functional") else ns.path
    if attr not in NAMESPACES[ns.path]:
        raise Refused(f"{ns.path}.{attr} is not on the allow-list", kind="refused")
    sub = f"{ns.path}.{attr}"
    if sub in NAMESPACES:
        return Namespace(sub)
    if path == "torch" and attr not in TORCH_FUNCTIONS:
        return getattr(torch, attr)  # a dtype or a number: names from a fixed table
    raise Refused(f"{ns.path}.{attr} is a function: call it, e.g. {ns.path}.{attr}(x)", kind="refused")


def _target(path: str, name: str) -> tuple[Callable[..., Any], str]:
    # Looked up at call time from fixed tables, so tests can patch torch.
    if path == "torch":
        return getattr(torch, name), TORCH_FUNCTIONS[name]
    if path in ("F", "torch.nn.functional", "nn.functional"):
        return getattr(torch.nn.functional, name), F_FUNCTIONS[name]
    if path == "custom":
        return custom.FUNCTIONS[name], CUSTOM_FUNCTIONS[name]
    if path == "torch.cuda":
        return getattr(torch.cuda, name), "same"
    raise Refused(f"{path}.{name} cannot be called", kind="refused")


def call_function(
    ns: Namespace, name: str, args: Sequence[Operand], kwargs: dict[str, Any], defaults: Defaults
) -> Any:
    """Call `ns.name(*args, **kwargs)` with its checks; `args` carry their labels."""
    if name not in NAMESPACES[ns.path]:
        raise Refused(f"{ns.path}.{name} is not on the allow-list", kind="refused")
    what = f"{ns.path}.{name}(...)"
    values = [v for _, v in args]
    check_no_namespaces(what, values, kwargs)
    if f"{ns.path}.{name}" in NAMESPACES:
        raise Refused(f"{ns.path}.{name} is not a function but a namespace (a group of functions): call one of "
                      f"them, e.g. {ns.path}.{name}.{min(NAMESPACES[f'{ns.path}.{name}'])}(...)", kind="refused")
    if ns.path == "torch.autograd":
        return call_grad(args, kwargs, defaults.budget)
    if ns.path in ("nn", "torch.nn") and name in NN_MODULES:
        return modules.construct(f"{ns.path}.{name}", name, args, kwargs, defaults)
    fn, growth = _target(ns.path, name)
    check_arguments(name, what, values, kwargs)
    _check_devices(values, kwargs)
    if ns.path == "torch" and name == "manual_seed":
        return _manual_seed(values, kwargs)
    if ns.path == "torch" and name == "chunk":
        _check_chunks(values[1:2], kwargs, what)
    if ns.path == "torch" and name in INT_DIVISIONS:
        _check_division(name, values, kwargs, what)
    if ns.path in ("torch", "F", "torch.nn.functional", "nn.functional"):
        _check_not_in_place(fn, name, values, kwargs, what)
    if growth == "ctor":
        kwargs = _constructor_defaults(fn, name, values, kwargs, defaults, what)
    return _run(fn, growth, what, args, kwargs, defaults.budget)


def call_method(
    base: Operand, name: str, args: Sequence[Operand], kwargs: dict[str, Any], defaults: Defaults
) -> Any:
    """Call `tensor.name(*args, **kwargs)` with its checks."""
    label, tensor = base
    if isinstance(tensor, modules.ProgramModule):
        raise Refused(modules.no_attribute(label, tensor, name), kind="refused")
    if not isinstance(tensor, torch.Tensor):
        raise Refused(
            f"{label}.{name}(...) needs a tensor, but {label} is a {type(tensor).__name__}", kind="refused"
        )
    if name not in TENSOR_METHODS:
        raise Refused(f"{label}.{name} is not an allowed tensor method", kind="refused")
    values = [v for _, v in args]
    what = f"{label}.{name}(...)"
    check_no_namespaces(what, values, kwargs)
    check_arguments(name, what, [tensor, *values], kwargs)
    _check_devices(values, kwargs)
    if name == "cuda":
        index = values[0] if values else kwargs.get("device")
        check_device("cuda" if index is None else f"cuda:{index}" if isinstance(index, int) else index)
    if name == "chunk":
        _check_chunks(values[:1], kwargs, f"{label}.chunk(...)")
    if name in INT_DIVISIONS:
        _check_division(name, [tensor, *values], kwargs, f"{label}.{name}(...)")
    method = getattr(tensor, name)  # name is from the fixed allow-list
    return _run(method, TENSOR_METHODS[name], f"{label}.{name}(...)", [base, *args], kwargs,
                defaults.budget, bound=True)


def call_builtin(name: str, args: Sequence[Operand], kwargs: dict[str, Any]) -> Any:
    """int(), float(), len(), abs(), min(), max(), round(), bool()."""
    what = f"{name}(...)"
    fn = getattr(builtins, name)  # name is from the fixed allow-list
    if name in ("min", "max") and len(args) == 1 and isinstance(args[0][1], torch.Tensor):
        _check_iteration(name, args[0])
    try:
        result = fn(*(v for _, v in args), **kwargs)
    except Exception as e:  # noqa: BLE001 - translated for people
        message, kind = explain(e, what, args)
        raise Refused(message, kind) from e
    return admit(result, what)


_MAX_ITERATED_ROWS = 10_000


def _check_iteration(name: str, operand: Operand) -> None:
    # Python iterates a tensor by unbinding it: one tensor object per row,
    # all alive at once (10**7 rows take GBs), outside the tensor budget.
    label, tensor = operand
    rows = tensor.shape[0] if tensor.dim() else 0
    if rows > _MAX_ITERATED_ROWS:
        raise Refused(
            f"{name}({label}) walks the tensor's {rows:,} rows one by one as Python objects (at most "
            f"{_MAX_ITERATED_ROWS:,}): use {label}.{name}() or torch.{name}({label}) instead",
        )


def admit(value: Any, what: str) -> Any:
    """Refuse results a program must not hold (anything but data and tensors)."""
    stack, seen = [value], 0
    while stack:  # iterative: lists built in loops can nest deeply
        item = stack.pop()
        seen += 1
        if seen > MAX_SEQUENCE:
            raise Refused(f"{what} gives more than {MAX_SEQUENCE:,} items in nested lists", kind="limit")
        if isinstance(item, torch.Tensor) and item.dim() > _MAX_DIMS:
            raise Refused(
                f"{what} gives a tensor of {item.dim()} dimensions; at most {_MAX_DIMS} are supported "
                "(the gradient checker and the page's value tables stop there): reshape it to fewer "
                "dimensions", kind="shape")
        if item is None or isinstance(item, (*_PLAIN, modules.ProgramModule)):
            continue
        if type(item) is int:
            check_int(item, what)
        elif isinstance(item, (tuple, list)) and (
            type(item) in (tuple, list, torch.Size) or type(item).__module__ == "torch.return_types"
        ):
            check_sequence_length(len(item), what)
            stack.extend(item)
        else:
            raise Refused(f"{what} returned a {type(item).__name__}, which programs cannot hold", kind="refused")
    return value


def check_no_namespaces(what: str, values: Sequence[Any], kwargs: dict[str, Any]) -> None:
    """Refuse `torch`, `F`, `nn`... given as an argument: programs pass values, never functions."""
    for key, value in [*((None, v) for v in values), *kwargs.items()]:
        if isinstance(value, Namespace):
            given = f"{key}={value.path}" if key else value.path
            hint = (": pass the activation by name, e.g. activation='gelu' or activation='relu'"
                    if key == "activation" else ": pass a number, a string or a tensor")
            raise Refused(f"{what} was given {given}, the {value.path} namespace (a group of functions), not a "
                          f"value; programs cannot pass functions as arguments{hint}", kind="input")


def _check_devices(values: Sequence[Any], kwargs: dict[str, Any]) -> None:
    for v in [*values, kwargs.get("device")]:
        if isinstance(v, torch.device) or (
            isinstance(v, str) and v.split(":")[0] in ("cpu", "cuda", "mps", "meta", "xpu")
        ):
            check_device(v)


def _check_chunks(counts: Sequence[Any], kwargs: dict[str, Any], what: str) -> None:
    # chunk() makes one Python tensor object per piece: bound their number.
    count = counts[0] if counts else kwargs.get("chunks")
    if isinstance(count, int) and count > _MAX_CHUNKS:
        raise Refused(f"{what} asks for {count:,} pieces; at most {_MAX_CHUNKS:,}")


def _check_not_in_place(fn: Callable[..., Any], name: str, values: Sequence[Any],
                        kwargs: dict[str, Any], what: str) -> None:
    """Refuse the argument combinations that make torch/F functions write into tensors.

    The validator refuses `inplace=` by keyword; these get there positionally
    or through options whose side effect is an in-place update.
    """
    try:
        bound = inspect.signature(fn).bind_partial(*values, **kwargs).arguments
    except (TypeError, ValueError):
        return  # torch refuses the call itself, with its own message
    running = bound.get("running_mean") is not None or bound.get("running_var") is not None
    stats_fix = "pass running_mean=None and running_var=None to normalize with the batch's own statistics"
    if bound.get("inplace"):
        why, fix = "its inplace argument is True", "leave inplace at its default, False"
    elif bound.get("out") is not None:  # torch.norm, torch.tensordot, F.normalize take it by position
        why, fix = "its out argument writes the result into an existing tensor", "assign the result instead"
    elif name == "embedding" and bound.get("max_norm") is not None:
        why, fix = "max_norm renormalizes rows of the weight in place", "leave max_norm at its default, None"
    elif name == "batch_norm" and bound.get("training") and running:
        why, fix = "training=True updates running_mean and running_var in place", stats_fix
    elif name == "instance_norm" and bound.get("use_input_stats", True) and running:
        why, fix = "use_input_stats=True updates running_mean and running_var in place", stats_fix
    else:
        return
    raise Refused(f"{what} would change a tensor in place ({why}); programs never change tensors "
                  f"in place, so the drawn graph stays whole: {fix}", kind="refused")


def _check_division(name: str, values: Sequence[Any], kwargs: dict[str, Any], what: str) -> None:
    dividend, divisor = division_operands(values, kwargs)
    check_integer_division(name, dividend, divisor, rounding_mode=kwargs.get("rounding_mode"), what=what)


def _manual_seed(values: Sequence[Any], kwargs: dict[str, Any]) -> None:
    seed = values[0] if values else kwargs.get("seed")
    if type(seed) is not int or len(values) + len(kwargs) != 1:
        raise Refused("torch.manual_seed takes one whole number, e.g. torch.manual_seed(0)", kind="refused")
    torch.manual_seed(seed)  # returns a Generator, which a program must not hold
    return None


def _constructor_defaults(
    fn: Callable[..., Any], name: str, values: Sequence[Any], kwargs: dict[str, Any],
    defaults: Defaults, what: str,
) -> dict[str, Any]:
    kwargs = dict(kwargs)
    if defaults.device is not None and "device" not in kwargs:
        kwargs["device"] = defaults.device
    wants = defaults.dtype
    if wants is not None and "dtype" not in kwargs and constructor_is_floating(name, values, kwargs):
        kwargs["dtype"] = wants
    if defaults.budget is not None:
        numel = constructor_numel(name, values, kwargs)
        if numel is not None:
            itemsize = kwargs["dtype"].itemsize if isinstance(kwargs.get("dtype"), torch.dtype) else 8
            defaults.budget.before(what, numel, numel * itemsize)
        else:  # an unusual call: let torch size it without memory
            precheck(lambda *a, **k: fn(*a, **{**k, "device": "meta"}), "meta", what, list(values),
                     kwargs, defaults.budget, name=name)
    return kwargs


def precheck(fn: Callable[..., Any], growth: str, what: str, values: list[Any],
             kwargs: dict[str, Any], budget: Budget, *, name: str = "") -> None:
    """Refuse a call whose output would break the limits, judged before running it."""
    everything = [*values, *kwargs.values()]
    size = max((t.element_size() for v in everything for t in tensors_in(v)), default=4)
    if growth == "broadcast":
        numel = broadcast_numel(everything)
        if numel is not None:
            budget.before(what, numel, numel * size)
    elif growth == "same":
        # At most as many elements as the largest input, unless an input is empty: a
        # reduction of a (10**9, 0) tensor over its empty dimension makes 10**9 elements.
        if any(t.numel() == 0 for v in everything for t in tensors_in(v)):
            _size_on_meta(fn, what, values, kwargs, budget)
        budget.costly(what, operation_cost(name, values, kwargs, None), size)
    elif growth == "meta":
        numel = op_numel(name, values, kwargs)
        if numel is not None:
            budget.before(what, numel, numel * size)
        else:
            outs = list(tensors_in(meta_run(fn, tuple(values), kwargs)))
            for t in outs:
                budget.before(what, t.numel(), t.numel() * t.element_size())
            numel = max((t.numel() for t in outs), default=None)
        budget.costly(what, operation_cost(name, values, kwargs, numel), size)


def _size_on_meta(fn: Callable[..., Any], what: str, values: list[Any], kwargs: dict[str, Any],
                  budget: Budget) -> None:
    """Refuse outputs too large, sized on meta; if meta cannot run it, bound them by the input's sizes."""
    found = meta_run(fn, tuple(values), kwargs)
    outs = list(tensors_in(found))
    if found is None:  # no meta kernel: an op on an empty input makes at most its non-empty sizes' product
        outs = []
        for t in (t for v in values for t in tensors_in(v) if t.numel() == 0):
            bound = min(math.prod(s for s in t.shape if s), 2**62)
            budget.before(what, bound, bound * t.element_size())
    for t in outs:
        budget.before(what, t.numel(), t.numel() * t.element_size())


def _run(fn: Callable[..., Any], growth: str, what: str, args: Sequence[Operand],
         kwargs: dict[str, Any], budget: Budget | None, *, bound: bool = False) -> Any:
    values = [v for _, v in args]
    call_values = values[1:] if bound else values
    if budget is not None:
        budget.lists(what, [*values, *kwargs.values()])
    if budget is not None and growth != "ctor":
        name = fn.__name__
        meta_fn = (lambda s, *a, **k: getattr(s, name)(*a, **k)) if bound else fn
        precheck(meta_fn, growth, what, values if bound else call_values, kwargs, budget, name=name)
    try:
        result = fn(*call_values, **kwargs)
    except Refused:
        raise
    except Exception as e:  # noqa: BLE001 - every failure is explained for people
        message, kind = explain(e, what, args)
        raise Refused(message, kind) from e
    if budget is not None:
        budget.after(what, result, [*values, *kwargs.values()])
    return admit(result, what)
