"""Run a job in a worker process that can be stopped: time and memory limits, a pool kept warm.

A generic mechanism with no torch and no expression language: the language's
rehearsal, the CLI and the web page are its clients. `IsolatedRunner` is the
pool; `shared_runner(name, settings)` the one way to get a pool shared by the
whole process; `JobRef` names a job so the caller never imports it; the
`RunnerError`s say what the runner did to a job (time, memory, crash, busy).
"""

from __future__ import annotations

from .deadline import HARD_GRACE_S, hard_deadline, in_worker_process
from .errors import (
    JobCancelled,
    JobNotPortable,
    JobOutOfMemory,
    JobTimeout,
    RunnerBusy,
    RunnerError,
    WorkerCrashed,
)
from .jobref import JobRef
from .pool import IsolatedRunner
from .shared import RunnerSettings, close_shared, running_shared, shared_runner
from .usage import JobUsage

__all__ = [
    "IsolatedRunner",
    "RunnerSettings",
    "shared_runner",
    "close_shared",
    "running_shared",
    "JobRef",
    "JobUsage",
    "hard_deadline",
    "in_worker_process",
    "HARD_GRACE_S",
    "RunnerError",
    "JobTimeout",
    "JobOutOfMemory",
    "WorkerCrashed",
    "RunnerBusy",
    "JobCancelled",
    "JobNotPortable",
]
