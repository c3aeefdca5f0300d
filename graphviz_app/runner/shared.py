"""One runner per name for the whole process: started on first use with its settings, closed at exit."""

from __future__ import annotations

import atexit
import threading
from dataclasses import asdict, dataclass

from .pool import IsolatedRunner

__all__ = ["RunnerSettings", "shared_runner", "close_shared", "running_shared"]


@dataclass(frozen=True, slots=True)
class RunnerSettings:
    """What a runner is made with (see `IsolatedRunner` for each field).

    >>> RunnerSettings(time_limit=5.0).time_limit
    5.0
    """

    workers: int = 2
    max_workers: int = 4
    time_limit: float = 10.0
    memory_limit: int | None = 2 * 1024**3
    threads: int = 1
    preload: tuple[str, ...] = ()
    max_jobs_per_worker: int = 200
    name: str = "graphviz-app-worker"

    def start(self) -> IsolatedRunner:
        """A new runner of the caller's own, with these settings (its workers start on first use)."""
        return IsolatedRunner(**asdict(self))


_runners: dict[str, tuple[RunnerSettings, IsolatedRunner]] = {}
_lock = threading.Lock()


def shared_runner(name: str, settings: RunnerSettings) -> IsolatedRunner:
    """The process's runner called `name`, started with `settings` on first use and closed at exit.

    Every caller naming the same runner gets the same pool, so one process keeps
    one set of warm workers per use (the language's rehearsal, the CLI, the page).

    Raises:
        ValueError: a runner of that name already runs with other settings (two
            uses sharing a name by mistake: give each its own name).
    """
    with _lock:
        found = _runners.get(name)
        if found is not None and not found[1].closed:
            if found[0] != settings:
                raise ValueError(f"the shared runner {name!r} already runs with {found[0]}, not {settings}: "
                                 "give a runner with other settings a name of its own")
            return found[1]
        runner = settings.start()
        _runners[name] = (settings, runner)
        return runner


def running_shared() -> tuple[str, ...]:
    """The names of the shared runners this process has started and not closed.

    >>> "no-such-runner" in running_shared()
    False
    """
    with _lock:
        return tuple(sorted(name for name, (_, runner) in _runners.items() if not runner.closed))


def close_shared(name: str | None = None) -> None:
    """Stop the shared runner `name` (all of them when None); the next `shared_runner` starts afresh."""
    with _lock:
        names = list(_runners) if name is None else [name]
        found = [_runners.pop(n)[1] for n in names if n in _runners]
    for runner in found:
        runner.close()


atexit.register(close_shared)
