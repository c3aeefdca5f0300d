"""The runner's own errors: a job ran out of time or memory, its worker died, or no worker was free."""

from __future__ import annotations

from typing import Any

from ..errors import GraphvizAppError

__all__ = [
    "RunnerError",
    "JobTimeout",
    "JobOutOfMemory",
    "WorkerCrashed",
    "RunnerBusy",
    "JobCancelled",
    "JobNotPortable",
]


class RunnerError(GraphvizAppError, RuntimeError):
    """A job could not run to its end in a worker process (not an error of the job itself).

    The job's own exceptions come back from `IsolatedRunner.run` as they were
    raised; these say what the runner did to the job instead.

    Attributes:
        message: What happened and what to do, on one line.
        kind: A short tag for front ends, one per subclass (``"time"``,
            ``"memory"``, ``"crash"``, ``"busy"``, ``"cancelled"``, ``"input"``);
            a caller may re-label one (the page's ``"overtime"``: a time-out
            that would happen again).

    >>> e = JobTimeout("the job ran longer than its time limit of 5 s")
    >>> e.kind, str(e)
    ('time', 'the job ran longer than its time limit of 5 s')
    """

    kind = "runner"

    def __init__(self, message: str, *, kind: str | None = None) -> None:
        self.message = " ".join(message.split())
        if kind is not None:
            self.kind = kind
        super().__init__(self.message)

    def __reduce__(self) -> tuple[Any, ...]:
        # A keyword-only argument needs explicit pickling (a job may run a runner of its own).
        return (_rebuild, (type(self), self.message, self.kind))


def _rebuild(cls: type[RunnerError], message: str, kind: str) -> RunnerError:
    return cls(message, kind=kind)


class JobTimeout(RunnerError):
    """The job ran past its time limit (or the hard deadline it set) and its worker was ended."""

    kind = "time"


class JobOutOfMemory(RunnerError):
    """The job asked for more memory than its limit allows."""

    kind = "memory"


class WorkerCrashed(RunnerError):
    """The worker process died while running the job (a signal, `os._exit`, torch crashing)."""

    kind = "crash"

    def __init__(self, message: str, *, kind: str | None = None, exit_code: int | None = None) -> None:
        super().__init__(message, kind=kind)
        self.exit_code = exit_code

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_crash, (self.message, self.kind, self.exit_code))


def _rebuild_crash(message: str, kind: str, exit_code: int | None) -> WorkerCrashed:
    return WorkerCrashed(message, kind=kind, exit_code=exit_code)


class RunnerBusy(RunnerError):
    """Every worker was taken for as long as the caller could wait."""

    kind = "busy"


class JobCancelled(RunnerError):
    """The caller asked for the job to stop (its `cancel` event), and its worker was ended."""

    kind = "cancelled"


class JobNotPortable(RunnerError):
    """The job, its arguments, its result or its exception could not cross between the processes."""

    kind = "input"
