"""A worker's CPU priority (nice value) for one job: heavy jobs yield the CPU to light ones.

A pool with more workers than the machine has cores shares the CPU between its
jobs; without priorities a runaway gets as much of it as a small program beside
it. A job run with `nice` N > 0 runs in a worker lowered by N (every thread of
it: Linux keeps a nice value per thread), so the kernel gives the CPU to the
normal-priority workers first. Raising a worker back is allowed only with the
privilege to (root, or RLIMIT_NICE); without it the pool retires the worker
instead of handing a lowered one to the next job.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["MAX_NICE", "set_nice", "supported"]

MAX_NICE = 19


def supported() -> bool:
    """Whether this platform lets a process change another's priority (POSIX)."""
    return hasattr(os, "setpriority") and hasattr(os, "getpriority")


def _threads(pid: int) -> list[int]:
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task") if t.isascii() and t.isdigit()]
    except OSError:
        return [pid]  # no /proc: the main thread, which does a job's work with one torch thread


def set_nice(pid: int, nice: int) -> bool:
    """Set every thread of process `pid` to `nice` (clamped to 0..19 above this process's own).

    Returns:
        True when done; False when not allowed (lowering a nice value without the
        privilege to) or the process is gone.
    """
    if not supported():
        return False
    value = min(os.getpriority(os.PRIO_PROCESS, 0) + max(nice, 0), MAX_NICE)
    try:
        for tid in _threads(pid):
            os.setpriority(os.PRIO_PROCESS, tid, value)
    except (PermissionError, ProcessLookupError):
        return False
    return Path(f"/proc/{pid}").exists() if Path("/proc").is_dir() else True
