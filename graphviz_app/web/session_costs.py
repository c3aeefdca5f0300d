"""What each page session cost the workers lately: the longest a job of it held a worker, whatever its text.

A runaway program that changes a comment each time is a new text every time,
but the session sending it keeps holding workers until their time limit: the
seconds one of its jobs held a worker (a killed worker's restart added) tell
it from a session sending small programs, however many of those it sends.
`FairRunner` treats a session with a job past `heavy_s` in the last `window_s`
as a suspect (it waits behind the others, holds at most half the workers, and
its running job may be stopped for a lighter session's).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

__all__ = ["SessionCosts", "RESTART_S"]

RESTART_S = 1.0  # a job that ended its worker (memory limit, crash, time-out) also costs its replacement


@dataclass
class SessionCosts:
    """The longest job per session over a sliding window, in worker-seconds.

    >>> costs = SessionCosts(window_s=60.0, heavy_s=5.0)
    >>> for seconds in (0.3, 15.0, 0.4):
    ...     costs.add("a", seconds, now=0.0)
    >>> costs.cost("a", now=30.0), costs.heavy("a", now=30.0), costs.heavy("a", now=61.0)
    (15.0, True, False)
    """

    window_s: float = 60.0
    heavy_s: float = 5.0
    _spent: dict[str, deque[tuple[float, float]]] = field(default_factory=dict)

    def add(self, session: str, seconds: float, *, now: float) -> None:
        """`session` held a worker for `seconds` (a job that ended at `now`)."""
        self._spent.setdefault(session, deque()).append((now, max(seconds, 0.0)))

    def cost(self, session: str, *, now: float, running: float = 0.0) -> float:
        """The longest a job of `session` held a worker in the window, or `running` (its job's time so far)."""
        spent = self._spent.get(session)
        if spent is None:
            return running
        while spent and now - spent[0][0] > self.window_s:
            spent.popleft()
        if not spent:
            del self._spent[session]
            return running
        return max(max(s for _, s in spent), running)

    def heavy(self, session: str, *, now: float, running: float = 0.0) -> bool:
        """Whether a job of `session` held a worker `heavy_s` or more lately (its running job included)."""
        return self.cost(session, now=now, running=running) >= self.heavy_s
