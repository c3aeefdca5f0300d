"""The one error type of the expression language, with a position in the source."""

from __future__ import annotations

from typing import Any

from ..errors import GraphvizAppError

__all__ = ["ExprError"]


class ExprError(GraphvizAppError, ValueError):
    """An expression program was refused, or failed while it ran.

    Attributes:
        message: What went wrong and what to do, without the position.
        line: 1-based line in the program, or None when no position applies.
        col: 1-based column (in characters) on that line, or None.
        kind: A short tag for front ends: ``"syntax"``, ``"refused"``,
            ``"name"``, ``"limit"``, ``"torch"``, ``"device"``, ``"shape"``,
            ``"dtype"``, ``"memory"``, ``"time"``, ``"input"``; from `evaluate`'s
            first run in a worker (`rehearsal`) also ``"crash"`` and ``"busy"``;
            ``"internal"`` for a bug in the evaluator itself. The worker pool's
            own errors are `graphviz_app.runner.RunnerError`s.
        source_line: The text of the offending line, when known.

    ``str(error)`` is one line: ``"line 2, col 5: <message>"``.
    ``error.excerpt`` is the source line with a caret under the column,
    for front ends that can show two lines.

    >>> str(ExprError("x is not defined", line=1, col=3))
    'line 1, col 3: x is not defined'
    """

    def __init__(
        self,
        message: str,
        *,
        line: int | None = None,
        col: int | None = None,
        kind: str = "refused",
        source_line: str | None = None,
    ) -> None:
        # Messages may quote torch's own multi-line text: keep one line.
        self.message = " ".join(message.split())
        self.line = line
        self.col = col
        self.kind = kind
        self.source_line = source_line
        super().__init__(self.__str__())

    def __str__(self) -> str:
        if self.line is None:
            return self.message
        if self.col is None:
            return f"line {self.line}: {self.message}"
        return f"line {self.line}, col {self.col}: {self.message}"

    @property
    def excerpt(self) -> str | None:
        """The offending source line and a caret under the column, or None."""
        if self.source_line is None or self.col is None:
            return None
        return f"{self.source_line}\n{' ' * (self.col - 1)}^"

    def __reduce__(self) -> tuple[Any, ...]:
        # Keyword-only arguments need explicit pickling (errors cross from
        # a worker process to its caller).
        return (
            _rebuild,
            (self.message, self.line, self.col, self.kind, self.source_line),
        )


def _rebuild(
    message: str, line: int | None, col: int | None, kind: str, source_line: str | None
) -> ExprError:
    return ExprError(message, line=line, col=col, kind=kind, source_line=source_line)
