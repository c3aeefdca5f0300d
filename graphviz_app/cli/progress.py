"""Progress lines on stderr for the steps of a command that may take a while.

A step says what it does ("laying out 805 nodes with dot (deadline 60 s)...")
once it has run for `after` seconds (1 s), so a quick command prints nothing.
Lines go to stderr when it is a terminal, or when asked (`--progress`): a
log or a pipe gets no lines unless the person wants them.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TextIO

__all__ = ["Progress", "Deadline", "PROGRESS_AFTER_S"]

PROGRESS_AFTER_S = 1.0


class Progress:
    """Says which step is running, on `stream`, once a step has taken `after` seconds.

    Args:
        prog: the command, in front of each line ("graphviz-app render").
        enabled: None: when `stream` is a terminal; True/False: always/never.
        stream: where the lines go (default: stderr).
        after: seconds a step runs before its line appears.

    >>> import io
    >>> out = io.StringIO()
    >>> with Progress("graphviz-app render", enabled=True, stream=out, after=0).step("tracing"):
    ...     pass
    >>> out.getvalue()
    'graphviz-app render: tracing...\\n'
    """

    def __init__(self, prog: str, *, enabled: bool | None = None, stream: TextIO | None = None,
                 after: float = PROGRESS_AFTER_S) -> None:
        self.prog, self.stream, self.after = prog, stream if stream is not None else sys.stderr, after
        if enabled is None:
            isatty = getattr(self.stream, "isatty", None)
            enabled = bool(isatty and isatty())
        self.enabled = enabled
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def step(self, text: str) -> Iterator[Callable[[str], None]]:
        """Say `text...` if the block is still running after `after` seconds.

        The block gets a function for its own lines (a layout's steps): held back
        until the step's line is said, then said as they come.
        """
        if not self.enabled:
            yield lambda line: None
            return
        held: list[str] = []
        said = threading.Event()

        def say_step() -> None:
            with self._lock:
                said.set()
                for line in [text, *held]:
                    print(f"{self.prog}: {line}...", file=self.stream, flush=True)
                held.clear()

        def relay(line: str) -> None:
            with self._lock:
                if not said.is_set():
                    held.append(line)
                    return
            self._say(line)

        timer = threading.Timer(self.after, say_step)
        timer.daemon = True
        if self.after <= 0:
            say_step()
        else:
            timer.start()
        try:
            yield relay
        finally:
            timer.cancel()

    def _say(self, text: str) -> None:
        with self._lock:
            print(f"{self.prog}: {text}...", file=self.stream, flush=True)


class Deadline:
    """The seconds a command may still take: `seconds` from now, the last step getting at least `floor`.

    >>> Deadline(60).left() > 59
    True
    """

    def __init__(self, seconds: float, *, floor: float = 1.0) -> None:
        self.seconds, self.floor = seconds, floor
        self._end = time.monotonic() + seconds

    def left(self) -> float:
        """Seconds until the deadline, at least `floor` (a step always gets a chance)."""
        return max(self._end - time.monotonic(), self.floor)
