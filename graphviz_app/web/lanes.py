"""Which lane a page's job takes: light by measurement first (what it and its page cost before), then by text.

The light lane is the workers `FairRunner` keeps free for small programs, and the
CPU priority a job runs at. A program's text can be judged before it runs
(`program_cost.judge`), but text can mislead both ways: a runaway whose sizes are
not literals, or a loop the judge over-counts. What the runner measured cannot:
a program that took more than `light_s` of CPU last time is heavy next time
whatever its text says, one that took less is light, and a page whose last job
ran long sends its next unknown or light-looking program down the heavy lane.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Literal

from .program_cost import Verdict

__all__ = ["Lane", "NICE", "DEMOTE_S", "lane", "CostBook"]

Lane = Literal["light", "heavy", "suspect"]
# The CPU priority (nice value) a job of each lane runs at: a heavy job yields the CPU to light ones,
# a suspect's (a page whose program ran to the time limit) to everyone.
NICE: dict[Lane, int] = {"light": 0, "heavy": 10, "suspect": 19}
# Wall seconds after which a light job still running is lowered to the heavy lane's priority: a light
# program takes well under a second of CPU; under load its wall time stretches, so a margin.
DEMOTE_S = 4.0


def lane(*, suspect: bool, verdict: Verdict, program_s: float | None, session_s: float | None,
         light_s: float) -> Lane:
    """The lane of a job.

    Args:
        suspect: the page, or this program, ran to the time limit lately.
        verdict: the program's text judged before it runs ("unknown" for jobs that are not programs).
        program_s: seconds (of CPU, where measured) this same program took when it last ran; None: not
            measured (never ran, or was stopped before it said anything).
        session_s: seconds the page's last job took; None: no job of the page measured lately.
        light_s: the most a light job takes.

    >>> lane(suspect=False, verdict="light", program_s=14.0, session_s=None, light_s=2.0)
    'heavy'
    >>> lane(suspect=False, verdict="heavy", program_s=0.1, session_s=None, light_s=2.0)
    'light'
    """
    if suspect:
        return "suspect"
    if program_s is not None:  # measured: the text no longer matters
        return "light" if program_s <= light_s else "heavy"
    if session_s is not None and session_s > light_s:
        return "heavy"  # the page's last job ran long: its next new program proves itself first
    if verdict == "light":
        return "light"
    return "light" if verdict == "unknown" and session_s is not None else "heavy"


class CostBook:
    """Seconds each key's last measured job took (a program, a page), forgotten after `keep_s`; bounded, thread-safe.

    >>> book = CostBook(size=2)
    >>> book.record("a", 0.5); book.record("b", 9.0); book.record("c", 0.1)
    >>> book.get("a") is None, book.get("b"), book.get("c")
    (True, 9.0, 0.1)
    """

    def __init__(self, *, size: int = 4096, keep_s: float = 600.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.size, self.keep_s, self._clock = size, keep_s, clock
        self._lock = threading.Lock()
        self._costs: OrderedDict[Hashable, tuple[float, float]] = OrderedDict()  # key -> (when, seconds)

    def record(self, key: Hashable, seconds: float) -> None:
        """Remember that `key`'s job took `seconds` (math.inf: it ran to the time limit)."""
        with self._lock:
            self._costs.pop(key, None)
            self._costs[key] = (self._clock(), seconds)
            while len(self._costs) > self.size:
                self._costs.popitem(last=False)

    def get(self, key: Hashable) -> float | None:
        """The seconds `key`'s last job took, or None (never measured, or longer ago than `keep_s`)."""
        with self._lock:
            found = self._costs.get(key)
            if found is None:
                return None
            if self._clock() - found[0] > self.keep_s:
                del self._costs[key]
                return None
            return found[1]

    def forget(self, key: Hashable) -> None:
        """Drop what is known of `key` (a job stopped early says nothing of what it costs)."""
        with self._lock:
            self._costs.pop(key, None)
