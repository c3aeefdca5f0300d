"""Integer division and remainder that cannot end the process with SIGFPE.

On x86, dividing the smallest signed integer by -1 overflows inside the
CPU's divide instruction, which raises SIGFPE and kills the whole process
(torch's ``div(..., rounding_mode='trunc')`` does it on int32/int64; other
modes and versions may). int8 and int16 do not trap: C++ widens them to int
before dividing, so their -128 // -1 wraps to -128 as Python's fixed-width
integers would. Dividing an integer by zero traps the same way where torch
does not check first. So integer division is looked at before it runs: a
zero divisor, or the smallest int32/int64 divided by -1, is refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from .guards import Refused

__all__ = ["INT_DIVISIONS", "check_integer_division", "division_operands"]

# Functions/methods that divide integers when both sides are integers
# (div and divide only with a rounding_mode; true division gives floats).
INT_DIVISIONS = frozenset({"div", "divide", "floor_divide", "remainder", "fmod", "//", "%"})
_ROUNDED_ONLY = frozenset({"div", "divide"})
# The widths the CPU divides natively, where the smallest value divided by -1 traps.
_TRAPPING = frozenset({torch.int32, torch.int64})


def _dtype_of(value: Any) -> torch.dtype | None:
    if isinstance(value, torch.Tensor):
        return value.dtype
    if isinstance(value, bool):
        return torch.bool
    if isinstance(value, int):
        return torch.int64
    if isinstance(value, float):
        return torch.float32
    return None


def _contains(value: Any, number: int) -> bool:
    if isinstance(value, torch.Tensor):
        try:
            return value.numel() > 0 and bool(value.eq(number).any())
        except RuntimeError:
            # vmap's batched tensors cannot be read; they only occur in re-runs
            # (to_function) of a program whose first run passed this check.
            return False
    return type(value) is int and value == number


def check_integer_division(
    name: str, dividend: Any, divisor: Any, *, rounding_mode: Any = None, what: str
) -> None:
    """Refuse `name(dividend, divisor)` where integer division would trap.

    Args:
        name: ``"//"``, ``"%"`` or one of the torch names in `INT_DIVISIONS`.
        dividend, divisor: The operands as the program gives them.
        rounding_mode: ``div``'s rounding mode (None is true division).
        what: The operation as typed, for the message.

    Raises:
        Refused: a zero divisor, or the smallest int32/int64 divided by -1.
    """
    if name not in INT_DIVISIONS or (name in _ROUNDED_ONLY and rounding_mode is None):
        return
    if not (isinstance(dividend, torch.Tensor) or isinstance(divisor, torch.Tensor)):
        return  # Python numbers divide safely (ZeroDivisionError at worst)
    a, b = _dtype_of(dividend), _dtype_of(divisor)
    if a is None or b is None:
        return
    try:
        result = torch.result_type(dividend, divisor)
    except (RuntimeError, TypeError):
        return  # torch will refuse the operands with its own message
    if result.is_floating_point or result.is_complex or result == torch.bool:
        return
    if _contains(divisor, 0):
        raise Refused(f"{what} divides an integer tensor by zero; divide floats instead "
                      "(e.g. x.float()) or make sure the divisor has no zeros", kind="torch")
    if result not in _TRAPPING:
        return  # unsigned, or int8/int16: widened before dividing, they wrap instead of trapping
    smallest = torch.iinfo(result).min
    if _contains(divisor, -1) and _contains(dividend, smallest):
        raise Refused(
            f"{what} divides the smallest {str(result).removeprefix('torch.')} value ({smallest}) by -1, "
            "which overflows and would crash the process; "
            f"{'use .long() or .double() first' if result != torch.int64 else 'use .double() first'}, "
            "or keep the values away from the minimum", kind="limit",
        )


def division_operands(values: Sequence[Any], kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """(dividend, divisor) of a call like ``torch.div(a, b)`` or ``a.div(b)`` (self first)."""
    dividend = values[0] if values else kwargs.get("input", kwargs.get("self"))
    divisor = values[1] if len(values) > 1 else kwargs.get("other")
    return dividend, divisor
