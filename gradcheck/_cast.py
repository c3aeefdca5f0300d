"""Cast copies of the float tensors and modules a function holds, for finite differences in float64."""

from __future__ import annotations

import copy
import functools
import types
from collections.abc import Callable
from typing import Any

import torch

from gradcheck._notes import dtype_label

__all__ = ["Cast", "cast_function"]

_ITSELF = "fn itself"


class Cast:
    """What `cast_function` made: the function to call, and what it cast (names and dtypes)."""

    __slots__ = ("fn", "names", "dtypes")

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.names: list[str] = []
        self.dtypes: list[torch.dtype] = []

    def note(self, dtype: torch.dtype) -> str | None:
        """A sentence for the report saying what was cast, or None if nothing was."""
        if not self.names:
            return None
        if self.names == [_ITSELF]:
            return (
                f"fn is an nn.Module with {dtype_label(self.dtypes)} parameters: finite differences "
                f"ran on a {dtype_label([dtype])} copy of it (the module itself is untouched)."
            )
        held = ", ".join(self.names)
        return (
            f"fn holds {dtype_label(self.dtypes)} tensors of its own ({held}): finite differences "
            f"ran on {dtype_label([dtype])} copies of them, so they compute in "
            f"{dtype_label([dtype])} (your objects are untouched)."
        )


def cast_function(fn: Callable[..., Any], dtype: torch.dtype | None) -> Cast:
    """`fn`, or a copy of it whose own float tensors and modules are cast to `dtype`.

    Looks at what `fn` itself holds: an nn.Module, a bound method's object, a
    functools.partial's arguments, a function's closure cells and the globals
    its code names. Deeper references (a helper function's own globals) are
    not followed; a function still mixing dtypes then fails on cast inputs
    and the caller falls back to the inputs' dtype.
    """
    cast = Cast(fn)
    if dtype is None:
        return cast
    cast.fn = _cast_value(fn, dtype, cast, "fn", top=True)
    return cast


def _cast_value(value: Any, dtype: torch.dtype, cast: Cast, name: str, *, top: bool = False) -> Any:
    if isinstance(value, torch.nn.Module):
        held = [t.dtype for t in [*value.parameters(), *value.buffers()] if t.is_floating_point()]
        if all(d == dtype for d in held):
            return value
        _record(cast, _ITSELF if top else name, held)
        return copy.deepcopy(value).to(dtype)
    if isinstance(value, torch.Tensor):
        if not value.is_floating_point() or value.dtype == dtype:
            return value
        _record(cast, name, [value.dtype])
        return value.detach().to(dtype)
    if not top:
        return value
    if isinstance(value, types.MethodType) and isinstance(value.__self__, torch.nn.Module):
        owner = _cast_value(value.__self__, dtype, cast, type(value.__self__).__name__)
        return value if owner is value.__self__ else types.MethodType(value.__func__, owner)
    if isinstance(value, functools.partial):
        func = _cast_value(value.func, dtype, cast, "fn", top=True)
        args = [_cast_value(a, dtype, cast, f"partial argument {k}") for k, a in enumerate(value.args)]
        kw = {k: _cast_value(v, dtype, cast, k) for k, v in value.keywords.items()}
        return functools.partial(func, *args, **kw)
    if isinstance(value, types.FunctionType):
        return _cast_function(value, dtype, cast)
    return value


def _cast_function(fn: types.FunctionType, dtype: torch.dtype, cast: Cast) -> Callable[..., Any]:
    before = len(cast.names)
    cells = None
    if fn.__closure__:
        values = [_cell_value(c) for c in fn.__closure__]
        names = fn.__code__.co_freevars
        cells = tuple(
            types.CellType(_cast_value(v, dtype, cast, n)) if v is not _EMPTY else c
            for v, n, c in zip(values, names, fn.__closure__, strict=True)
        )
    scope = fn.__globals__
    swapped = {
        n: _cast_value(scope[n], dtype, cast, n)
        for n in _global_names(fn.__code__)
        if n in scope and isinstance(scope[n], (torch.nn.Module, torch.Tensor))
    }
    if len(cast.names) == before:
        return fn
    # A copy of fn reading the cast values: the user's module and tensors stay as they are.
    copied = types.FunctionType(fn.__code__, {**scope, **swapped}, fn.__name__, fn.__defaults__, cells)
    copied.__kwdefaults__ = fn.__kwdefaults__
    return copied


_EMPTY = object()


def _global_names(code: types.CodeType) -> list[str]:
    """Names fn's code and the functions defined inside it may read as globals."""
    names: dict[str, None] = {}
    stack = [code]
    while stack:  # nested lambdas and defs share fn's globals
        c = stack.pop()
        names.update(dict.fromkeys(c.co_names))
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return list(names)


def _cell_value(cell: types.CellType) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell: a name assigned after the closure was made
        return _EMPTY


def _record(cast: Cast, name: str, dtypes: list[torch.dtype]) -> None:
    if name not in cast.names:
        cast.names.append(name)
    cast.dtypes.extend(d for d in dtypes if d not in cast.dtypes)
