"""Waiting for an event in a test: poll a condition, with a timeout that bounds a hang, not a speed."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["wait_until", "process_alive"]


def wait_until(condition: Callable[[], object], *, timeout: float, what: str) -> None:
    """Poll `condition` until it holds; fail saying `what` did not happen within `timeout` seconds.

    The timeout is generous on purpose: it bounds a hang; it does not measure speed.

    >>> wait_until(lambda: True, timeout=1, what="nothing")
    >>> wait_until(lambda: False, timeout=0, what="the impossible")
    Traceback (most recent call last):
    ...
    AssertionError: the impossible did not happen within 0 s
    """
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout:g} s")
        time.sleep(0.05)


def process_alive(pid: int) -> bool:
    """Whether process `pid` still runs: a zombie has ended (its parent reaps it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return stat.rpartition(")")[2].split()[0] != "Z"
