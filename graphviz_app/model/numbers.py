"""Numbers typed by people (command-line options, page links): ASCII digits only, in a stated range.

Python's `int()` reads more than people mean: `int("1_0")` is 10, `int("٣")` (an
Arabic-Indic three) is 3, and `"²".isdigit()` is True while `int("²")` raises. Every
number the CLI and the page read from text goes through these two functions instead.
"""

from __future__ import annotations

import math
import re

__all__ = ["NumberError", "is_decimal", "whole_number", "real_number", "LARGEST_SIZE"]

# The largest batch size, sequence length or count accepted: 2**31 - 1, the most one
# dimension may hold in every library we hand sizes to (larger ones overflow int32 indexing
# or, multiplied by the other dimensions, the int64 element count).
LARGEST_SIZE = 2**31 - 1

_DECIMAL = re.compile(r"[0-9]+")
_REAL = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


class NumberError(ValueError):
    """A number typed as text is not one, or not in its range; the message says which and what is allowed."""


def is_decimal(text: str) -> bool:
    """Whether `text` is one or more of the ASCII digits 0-9 and nothing else.

    >>> is_decimal("12"), is_decimal("1_0"), is_decimal("²"), is_decimal("٣"), is_decimal("")
    (True, False, False, False, False)
    """
    return _DECIMAL.fullmatch(text) is not None


def whole_number(text: str, *, low: int = 0, high: int = LARGEST_SIZE) -> int:
    """`text` as an int: optional sign, ASCII digits only (no `_`, no other scripts), within [low, high].

    >>> whole_number("32", low=1)
    32
    >>> whole_number("1_0", low=1)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    graphviz_app.model.numbers.NumberError: expected a whole number from 1 to 2,147,483,647 ... found '1_0'
    >>> whole_number("1e11", low=1)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    graphviz_app.model.numbers.NumberError: ... found '1e11' (1e11 is 100,000,000,000, outside that range)

    Raises:
        NumberError: not ASCII decimal digits, or outside the range.
    """
    stripped = text.strip()
    digits = stripped[1:] if stripped[:1] in "+-" else stripped
    expected = f"expected a whole number from {low:,} to {high:,}"
    if not is_decimal(digits):
        hint = ""
        if _REAL.fullmatch(stripped) and math.isfinite(float(stripped)) and float(stripped).is_integer():
            value = float(stripped)
            hint = f" ({stripped} is {value:,.0f}{'' if low <= value <= high else ', outside that range'})"
        raise NumberError(f"{expected} written with the digits 0-9, found {text!r}{hint}")
    if len(digits) > len(str(high)) + 1:  # int() of a 5,000-digit string is refused by Python itself
        raise NumberError(f"{expected}, found a number of {len(digits):,} digits")
    value = int(stripped)
    if not low <= value <= high:
        raise NumberError(f"{expected}, found {value:,}")
    return value


def real_number(text: str, *, low: float = 0.0, high: float = math.inf, low_open: bool = False) -> float:
    """`text` as a finite float written with ASCII digits (`1.5`, `1e-6`, `.5`), within [low, high]
    (`low_open`: above `low`, not equal to it). No `_`, `nan`, `inf` or digits of other scripts.

    >>> real_number("1e-6", low=0.0, low_open=True)
    1e-06
    >>> real_number("nan")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    graphviz_app.model.numbers.NumberError: expected a number written with the digits 0-9 ... found 'nan'

    Raises:
        NumberError: not such a number, or outside the range.
    """
    stripped = text.strip()
    if _REAL.fullmatch(stripped) is None:
        raise NumberError(f"expected a number written with the digits 0-9 (e.g. 30, 2.5 or 1e-6), "
                          f"found {text!r}")
    value = float(stripped)
    above = value > low if low_open else value >= low
    if not math.isfinite(value) or not above or value > high:
        bound = f"above {low:g}" if low_open else f"at least {low:g}"
        bound += "" if math.isinf(high) else f" and at most {high:g}"
        raise NumberError(f"expected a number {bound}, found {text!r}")
    return value
