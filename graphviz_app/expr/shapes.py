"""Output sizes computed from arguments alone, before anything is allocated.

Torch's ``meta`` device computes any op's output shape without memory, but
its first use imports most of torch's Python decompositions (seconds), so
the common cases (constructors, matmul, cat, repeat, ...) are sized here and
``meta`` is left to rarer ops (einsum, conv, pad, ...).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

__all__ = ["constructor_numel", "constructor_is_floating", "op_numel", "nested_numel"]

_HUGE = 2**62  # any count past this is refused anyway; keeps arithmetic small
_SIZED = {"zeros", "ones", "rand", "randn", "empty"}
_ALWAYS_FLOAT = _SIZED | {"eye", "linspace", "logspace"}


def nested_numel(data: Any) -> int:
    """Elements torch.tensor(data) would make, following the first item down.

    Nested lists from a program can be shared many times (``[[0]*n]*n``), so
    this multiplies lengths along the first-item path instead of visiting every
    item; torch rejects ragged lists itself.
    """
    numel, depth = 1, 0
    while isinstance(data, (list, tuple)) and depth < 64:
        numel = min(numel * len(data), _HUGE)
        if not data:
            return 0
        data, depth = data[0], depth + 1
    if isinstance(data, torch.Tensor):
        numel = min(numel * data.numel(), _HUGE)
    return numel


def _product(sizes: Sequence[Any]) -> int | None:
    total = 1
    for s in sizes:
        if isinstance(s, torch.Tensor) and s.numel() == 1:
            s = int(s.item())
        if type(s) is not int:
            return None
        total = min(total * max(s, 0), _HUGE)
    return total


def _size_argument(args: Sequence[Any], kwargs: dict[str, Any]) -> int | None:
    """numel for `f(2, 3)`, `f((2, 3))`, `f([2, 3])` or `f(size=(2, 3))`."""
    if "size" in kwargs:
        size = kwargs["size"]
        return _product(size) if isinstance(size, (list, tuple)) else _product([size])
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        return _product(args[0])
    return _product(args)


def _number(value: Any) -> float | None:
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _arange_numel(args: Sequence[Any], kwargs: dict[str, Any]) -> int | None:
    names = ("start", "end", "step")
    given = list(args[:3])
    if len(given) == 1:
        given = [0, given[0]]
    bound = dict(zip(names, given, strict=False))  # positional arguments may stop early
    bound.update({k: kwargs[k] for k in names if k in kwargs})
    start, end, step = (_number(bound.get(k, d)) for k, d in zip(names, (0, None, 1), strict=True))
    if start is None or end is None or step is None or step == 0:
        return None
    count = (end - start) / step
    if math.isnan(count):
        return None
    return _HUGE if count > _HUGE else max(math.ceil(count), 0)


def constructor_numel(name: str, args: Sequence[Any], kwargs: dict[str, Any]) -> int | None:
    """Elements a torch constructor call would make; None if the call is unusual."""
    if name in _SIZED:
        return _size_argument(args, kwargs)
    if name == "full":
        size = args[0] if args else kwargs.get("size")
        return _product(size) if isinstance(size, (list, tuple)) else None
    if name == "eye":
        n = args[0] if args else kwargs.get("n")
        m = args[1] if len(args) > 1 else kwargs.get("m", n)
        return _product([n, m])
    if name == "arange":
        return _arange_numel(args, kwargs)
    if name in ("linspace", "logspace"):
        steps = args[2] if len(args) > 2 else kwargs.get("steps")
        return _product([steps])
    if name == "randint":
        size = kwargs.get("size", args[-1] if args else None)
        return _product(size) if isinstance(size, (list, tuple)) else None
    if name == "randperm":
        return _product([args[0] if args else kwargs.get("n")])
    if name == "tensor":
        return nested_numel(args[0]) if args else None
    return None


def _first_leaf(data: Any) -> Any:
    while isinstance(data, (list, tuple)) and data:
        data = data[0]
    return data


def _is_float(value: Any) -> bool:
    if isinstance(value, torch.Tensor):
        return value.dtype.is_floating_point
    return isinstance(value, float)


def constructor_is_floating(name: str, args: Sequence[Any], kwargs: dict[str, Any]) -> bool:
    """Whether the constructor makes a floating tensor when no dtype is given."""
    if name in _ALWAYS_FLOAT:
        return True
    if name == "full":
        fill = args[1] if len(args) > 1 else kwargs.get("fill_value")
        return _is_float(fill)
    if name == "arange":
        return any(_is_float(v) for v in [*args[:3], *(kwargs.get(k) for k in ("start", "end", "step"))])
    if name == "tensor" and args:
        data = args[0]
        if isinstance(data, (list, tuple)) and nested_numel(data) <= 10_000:
            stack = [data]
            while stack:  # small literals: look at every number
                item = stack.pop()
                if isinstance(item, (list, tuple)):
                    stack.extend(item)
                elif _is_float(item):
                    return True
            return False
        return _is_float(_first_leaf(data))
    return False


def _shape(value: Any) -> tuple[int, ...] | None:
    return tuple(value.shape) if isinstance(value, torch.Tensor) else None


def _broadcast(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...] | None:
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x != y and 1 not in (x, y):
            return None
        out.append(y if x == 1 else x)
    return tuple(reversed(out))


def _matmul_numel(a: Any, b: Any) -> int | None:
    sa, sb = _shape(a), _shape(b)
    if sa is None or sb is None or not sa or not sb:
        return None
    n = sa[-2] if len(sa) > 1 else 1
    m = sb[-1] if len(sb) > 1 else 1
    batch = _broadcast(sa[:-2], sb[:-2])
    return None if batch is None else _product([*batch, n, m])


def _expand_numel(base: Any, sizes: Sequence[Any]) -> int | None:
    shape = _shape(base)
    if shape is None:
        return None
    if len(sizes) == 1 and isinstance(sizes[0], (list, tuple)):
        sizes = sizes[0]
    offset = len(sizes) - len(shape)
    real = [shape[i - offset] if s == -1 and i >= offset else s for i, s in enumerate(sizes)]
    return _product(real)


def op_numel(name: str, values: Sequence[Any], kwargs: dict[str, Any]) -> int | None:
    """Elements the (largest) output of op `name` would have; None to ask torch's meta device.

    `values` are the positional arguments, the tensor itself first for methods.
    """
    if name in ("matmul", "mm", "bmm", "mv") and len(values) == 2:
        return _matmul_numel(values[0], values[1])
    if name == "linear" and len(values) >= 2:
        sx, sw = _shape(values[0]), _shape(values[1])
        return None if not sx or not sw else _product([*sx[:-1], sw[0] if len(sw) == 2 else 1])
    tensors = [v for v in values if isinstance(v, torch.Tensor)]
    if name in ("cat", "concat", "concatenate", "stack", "hstack", "vstack", "dstack", "column_stack") and values:
        parts = values[0] if isinstance(values[0], (list, tuple)) else ()
        return min(sum(t.numel() for t in parts if isinstance(t, torch.Tensor)), _HUGE)
    if name in ("outer", "ger", "kron", "cartesian_prod") and tensors:
        factor = len(tensors) if name == "cartesian_prod" else 1
        return min(math.prod(t.numel() for t in tensors) * factor, _HUGE)
    if name in ("repeat", "tile") and tensors:
        reps = values[1:]
        if len(reps) == 1 and isinstance(reps[0], (list, tuple)):
            reps = reps[0]
        count = _product(list(reps) or list(kwargs.get("dims", ())))
        return None if count is None else min(values[0].numel() * count, _HUGE)
    if name in ("expand", "broadcast_to") and tensors:
        sizes = values[1:] or [kwargs.get("size", ())]
        return _expand_numel(values[0], sizes)
    if name == "expand_as" and len(tensors) == 2:
        return tensors[1].numel()
    if name == "one_hot" and tensors and tensors[0].dtype == torch.int64:
        classes = values[1] if len(values) > 1 else kwargs.get("num_classes", -1)
        if classes == -1:  # torch takes the count from the data: look at it first
            classes = int(tensors[0].max()) + 1 if tensors[0].numel() else 0
        return _product([tensors[0].numel(), classes])
    if name == "pad" and tensors:
        return _pad_numel(values, kwargs)
    if name in ("new_zeros", "new_ones", "new_full") and len(values) > 1:
        size = values[1]
        return _product(size) if isinstance(size, (list, tuple)) else _product([size])
    return None


def _pad_numel(values: Sequence[Any], kwargs: dict[str, Any]) -> int | None:
    """Elements of `F.pad(x, pad)`, in Python integers: torch's own sum overflows for huge paddings."""
    x = values[0]
    pad = values[1] if len(values) > 1 else kwargs.get("pad")
    if not isinstance(x, torch.Tensor) or not isinstance(pad, (list, tuple)) or len(pad) % 2:
        return None
    if not all(type(p) is int for p in pad) or len(pad) > 2 * x.dim():
        return None
    sizes = list(x.shape)
    for i in range(0, len(pad), 2):
        sizes[-1 - i // 2] += pad[i] + pad[i + 1]
    return None if min(sizes, default=0) < 0 else _product(sizes)
