"""The CLI's option types: numbers and devices read strictly (ASCII digits, stated ranges), for argparse.

argparse's `type=int` takes `1_0` and `٣` (Arabic-Indic 3); these refuse them, and a
size beyond what a tensor dimension can hold, before any worker starts.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable

from ..model.numbers import LARGEST_SIZE, NumberError, real_number, whole_number

__all__ = ["whole", "real", "sizes", "device", "LONGEST_TIMEOUT_S"]

LONGEST_TIMEOUT_S = 7 * 24 * 3600.0  # a week: beyond, a deadline is no deadline (and overflows some waits)

_DEVICE = re.compile(r"(?P<type>[a-z]+)(:(?P<index>[0-9]+))?")


def whole(low: int = 0, high: int = LARGEST_SIZE, *, hint: str = "") -> Callable[[str], int]:
    """An argparse type: a whole number in [low, high] written in ASCII digits; `hint` says what to do.

    >>> whole(1, 2)("2")
    2
    """
    def parse(text: str) -> int:
        try:
            return whole_number(text, low=low, high=high)
        except NumberError as e:
            raise argparse.ArgumentTypeError(f"{e}{hint}") from e

    return parse


def real(low: float = 0.0, high: float = math.inf, *, low_open: bool = False) -> Callable[[str], float]:
    """An argparse type: a finite number in its range written in ASCII digits (no nan, inf, `_`).

    >>> real(0.0, low_open=True)("1e-6")
    1e-06
    """
    def parse(text: str) -> float:
        try:
            return real_number(text, low=low, high=high, low_open=low_open)
        except NumberError as e:
            raise argparse.ArgumentTypeError(str(e)) from e

    return parse


def sizes(text: str) -> tuple[int, ...]:
    """An argparse type: sizes separated by commas (`1,8,32`), each from 1 to `LARGEST_SIZE`.

    >>> sizes("1,8, 32")
    (1, 8, 32)
    """
    parts = [p for p in text.split(",") if p.strip()]
    if not parts:
        raise argparse.ArgumentTypeError(f"expected sizes separated by commas, e.g. 1,8,32, found {text!r}")
    found = []
    for part in parts:
        try:
            found.append(whole_number(part, low=1, high=LARGEST_SIZE))
        except NumberError as e:
            raise argparse.ArgumentTypeError(
                f"{e}; give sizes separated by commas, e.g. 1,8,32") from e
    return tuple(found)


def device(*types: str) -> Callable[[str], str]:
    """An argparse type: one of `types` (cpu, cuda, meta, auto), cuda optionally as cuda:N in ASCII digits.

    Whether this machine has that device is for the worker to say (the CLI never loads torch).

    >>> device("cpu", "cuda")("cuda:1")
    'cuda:1'
    """
    shown = ", ".join(types) + (" or cuda:N" if "cuda" in types else "")

    def parse(text: str) -> str:
        match = _DEVICE.fullmatch(text.strip())
        index = None if match is None else match["index"]
        ok = match is not None and match["type"] in types and (index is None or match["type"] == "cuda")
        if not ok or (index is not None and len(index) > len(str(LARGEST_SIZE))):
            raise argparse.ArgumentTypeError(f"expected {shown} (N written with the digits 0-9), found {text!r}")
        return text.strip()

    return parse
