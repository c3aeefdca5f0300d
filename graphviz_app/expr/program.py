"""A parsed, checked program and the positions its errors point at."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from .errors import ExprError

__all__ = ["Program"]


@dataclass(frozen=True)
class Program:
    """A program that passed `validate`: its syntax tree and what it defines.

    Attributes:
        source: The program text.
        tree: Its syntax tree (only allow-listed node types remain).
        defined: Names the program assigns, in order of first definition.
        inputs: Names assigned exactly once, at the top level, outside any
            loop: the variables `to_function` can replace by given tensors.
    """

    source: str
    tree: ast.Module
    defined: tuple[str, ...]
    inputs: frozenset[str]
    _lines: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_lines", tuple(self.source.splitlines()))

    def error(self, node: ast.AST | None, message: str, *, kind: str = "refused") -> ExprError:
        """An ExprError pointing at `node` (or at no position when None)."""
        line, col = position(node, self._lines)
        text = self._lines[line - 1] if line is not None and line <= len(self._lines) else None
        return ExprError(message, line=line, col=col, kind=kind, source_line=text)

    def text(self, node: ast.AST) -> str:
        """The source text of `node`, as the person typed it (best effort)."""
        segment = ast.get_source_segment(self.source, node)
        return segment if segment is not None else ast.unparse(node)


def position(node: ast.AST | None, lines: tuple[str, ...]) -> tuple[int | None, int | None]:
    """1-based (line, column in characters) of `node`, or (None, None)."""
    lineno = getattr(node, "lineno", None)
    if lineno is None:
        return None, None
    offset = getattr(node, "col_offset", 0) or 0
    if 1 <= lineno <= len(lines):
        # ast offsets count UTF-8 bytes; people count characters.
        prefix = lines[lineno - 1].encode("utf-8")[:offset]
        return lineno, len(prefix.decode("utf-8", errors="ignore")) + 1
    return lineno, offset + 1
