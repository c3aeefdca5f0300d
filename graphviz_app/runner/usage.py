"""How much CPU a job got in its worker: its CPU time against the wall time it ran, measured from /proc.

A job that ran out of time with a CPU of its own would stop at the same point
again; one that got a fraction of a CPU (other programs ran) may pass at a
quieter moment. Counting the other programs does not tell these apart (at a
load of 8 on 2 cores a worker gets a quarter of a CPU whatever ran beside it
on the page); the worker's own CPU time does. It counts the worker and every
process in its process group (a `dot` layout it started), on Linux; elsewhere
the share is unknown (None).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["JobUsage", "CpuClock", "BUSY_SHARE", "group_cpu_seconds"]

# Below this share of a CPU the machine was busy: the job lost more than a third of its time to others.
BUSY_SHARE = 0.65
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") and "SC_CLK_TCK" in os.sysconf_names else 100


@dataclass(frozen=True, slots=True)
class JobUsage:
    """The wall time a job ran and the CPU time its worker (and what it started) used meanwhile.

    >>> JobUsage(10.0, 2.5).share, JobUsage(10.0, 2.5).busy
    (0.25, True)
    >>> JobUsage(10.0, None).busy is None
    True
    """

    wall_s: float
    cpu_s: float | None

    @property
    def share(self) -> float | None:
        """The share of one CPU the job got: about 1.0 alone (one torch thread), less when others ran."""
        if self.cpu_s is None or self.wall_s <= 0:
            return None
        return self.cpu_s / self.wall_s

    @property
    def busy(self) -> bool | None:
        """Whether others took a good part of the CPU it needed (None when not measured)."""
        share = self.share
        return None if share is None else share < BUSY_SHARE


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name, or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rpartition(")")[2].split()


def group_cpu_seconds(pid: int, *, children_running: bool = True) -> float | None:
    """CPU seconds used by process `pid`, its reaped children, and (optionally) the running members of its group."""
    fields = _stat(pid)
    if fields is None or len(fields) < 15:
        return None
    ticks = sum(int(v) for v in fields[11:15])  # utime, stime, cutime, cstime
    if children_running:
        try:
            entries = [e for e in os.listdir("/proc") if e.isascii() and e.isdigit() and int(e) != pid]
        except OSError:
            entries = []
        for entry in entries:
            other = _stat(int(entry))
            if other is not None and len(other) > 12 and other[2] == str(pid):  # pgrp: a child it started
                ticks += int(other[11]) + int(other[12])
    return ticks / _TICKS


class CpuClock:
    """Started when a job is sent to worker `pid`; `stop()` gives its `JobUsage`."""

    def __init__(self, pid: int | None) -> None:
        self.pid = pid
        self.start = time.monotonic()
        self.cpu0 = None if pid is None else group_cpu_seconds(pid, children_running=False)
        self._last: JobUsage | None = None  # the latest sample, for a worker gone before `stop`

    def sample(self) -> None:
        """Read the usage now and keep it: a worker that dies (a hard deadline) can no longer be read."""
        usage = self._read(children_running=True)
        if usage.cpu_s is not None:
            self._last = usage

    def stop(self, *, children_running: bool = False) -> JobUsage:
        """The usage so far; `children_running` adds group members still running (at a time-out).

        When the worker is gone, the latest sample (over the time it covers), else no CPU figure.
        """
        usage = self._read(children_running=children_running)
        if usage.cpu_s is None and self._last is not None:
            return self._last
        return usage

    def _read(self, *, children_running: bool) -> JobUsage:
        wall = time.monotonic() - self.start
        if self.pid is None or self.cpu0 is None:
            return JobUsage(wall, None)
        cpu = group_cpu_seconds(self.pid, children_running=children_running)
        return JobUsage(wall, None if cpu is None else max(cpu - self.cpu0, 0.0))
