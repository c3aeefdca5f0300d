"""Waiting for an event in a test: poll a condition, with a timeout that bounds a hang, not a speed."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["wait_until", "process_alive", "worker_ends_with_its_owner"]


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


def worker_ends_with_its_owner(owner: subprocess.Popen[bytes], pid_file: Path, *, start_timeout: float,
                               owner_name: str) -> int:
    """Wait for the worker to write its pid into `pid_file`, kill `owner` with SIGKILL, and fail unless the
    worker (another process than the owner) ends within 30 s; the worker's pid. Neither process is left behind,
    even on failure."""
    worker = 0
    try:
        wait_until(lambda: pid_file.exists() and pid_file.read_text(), timeout=start_timeout,
                   what="the worker's job starting")
        worker = int(pid_file.read_text())
        assert worker != owner.pid and process_alive(worker)
        owner.send_signal(signal.SIGKILL)
        owner.wait(30)
        wait_until(lambda: not process_alive(worker), timeout=30,
                   what=f"worker {worker} ending after {owner_name}'s SIGKILL")
        return worker
    finally:
        if owner.poll() is None:
            owner.kill()
        if worker and process_alive(worker):
            os.kill(worker, signal.SIGKILL)
