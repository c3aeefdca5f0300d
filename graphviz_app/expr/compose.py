"""Build one program from parts (a file, NAME=EXPR definitions, an expression), keeping where each line came from."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from .errors import ExprError

__all__ = ["Composed", "compose"]

_DEFINITION = re.compile(r"^\s*[A-Za-z_][A-Za-z0-9_]*\s*=(?!=)")


@dataclass(frozen=True, slots=True)
class _Part:
    label: str  # "--var 2", "the expression", "prog.txt"
    first: int  # first line in the composed program, 1-based
    count: int
    numbered: bool  # say "line N" inside the part


@dataclass(frozen=True)
class Composed:
    """A program built from parts; `locate` maps errors back to the part."""

    source: str
    parts: tuple[_Part, ...]

    def locate(self, error: ExprError) -> str:
        """`error` as one line, positioned in the part the person typed.

        >>> c = compose("y + 1", definitions=["x = torch.ones(3)"])
        >>> c.locate(ExprError("y is not defined", line=2, col=1))
        'in the expression (col 1): y is not defined'
        """
        if error.line is None:
            return error.message
        for part in self.parts:
            if part.first <= error.line < part.first + part.count:
                line = error.line - part.first + 1
                where = [f"line {line}"] if part.numbered else []
                where += [f"col {error.col}"] if error.col is not None else []
                if where:
                    return f"in {part.label} ({', '.join(where)}): {error.message}"
                return f"in {part.label}: {error.message}"
        return str(error)


def compose(
    expression: str | None = None, *, definitions: Sequence[str] = (), program: str | None = None,
    program_name: str = "the program",
) -> Composed:
    """One program: `program` text first, then each definition, then `expression`.

    Args:
        expression: The output expression (None when `program` ends with it).
        definitions: ``NAME=EXPR`` lines, e.g. ``x=torch.arange(3., requires_grad=True)``.
        program: A whole program's text (e.g. read from a file).
        program_name: How to name `program` in messages.

    Raises:
        ExprError: a definition is not ``NAME=EXPR`` on one line, or nothing was given.
    """
    lines: list[str] = []
    parts: list[_Part] = []

    def add(text: str, label: str, numbered: bool) -> None:
        chunk = text.splitlines() or [""]
        parts.append(_Part(label, len(lines) + 1, len(chunk), numbered))
        lines.extend(chunk)

    if program is not None:
        add(program, program_name, True)
    for i, definition in enumerate(definitions, 1):
        if "\n" in definition or not _DEFINITION.match(definition):
            raise ExprError(
                f"--var {i} must be NAME=EXPRESSION on one line, e.g. "
                f"x=torch.arange(3., requires_grad=True); found {definition!r}", kind="input")
        add(definition, f"--var {i} ({definition.strip()[:40]})", False)
    if expression is not None:
        add(expression, "the expression", "\n" in expression.strip())
    if not lines:
        raise ExprError("give an expression, or a program with --program FILE", kind="input")
    return Composed("\n".join(lines), tuple(parts))
