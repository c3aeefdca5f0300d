"""A parsed, checked program and the positions its errors point at."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from .errors import ExprError

__all__ = ["Program", "position"]

_LINE_BREAK = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class Program:
    """A program that passed `validate`: its syntax tree and what it defines.

    Attributes:
        source: The program text.
        tree: Its syntax tree (only allow-listed node types remain).
        defined: Names the program assigns, in order of first definition.
        inputs: Names assigned exactly once, at the top level, outside any
            loop or `with` block: the variables `to_function` can replace by given tensors.
    """

    source: str
    tree: ast.Module
    defined: tuple[str, ...]
    inputs: frozenset[str]
    _lines: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _texts: dict[int, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Split like the parser counts lines (not str.splitlines, which also
        # splits at form feeds and other separators).
        object.__setattr__(self, "_lines", tuple(_LINE_BREAK.split(self.source)))
        object.__setattr__(self, "_texts", {})

    def error(self, node: ast.AST | None, message: str, *, kind: str = "refused") -> ExprError:
        """An ExprError pointing at `node` (or at no position when None)."""
        line, col = position(node, self._lines)
        text = self._lines[line - 1] if line is not None and line <= len(self._lines) else None
        return ExprError(message, line=line, col=col, kind=kind, source_line=text)

    def text(self, node: ast.AST) -> str:
        """The source text of `node`, as the person typed it (cached per node)."""
        key = id(node)  # nodes live as long as the program's tree
        if key not in self._texts:
            self._texts[key] = self._segment(node) or ast.unparse(node)
        return self._texts[key]

    def _segment(self, node: ast.AST) -> str | None:
        try:
            first, last = node.lineno, node.end_lineno  # type: ignore[attr-defined]
            start, end = node.col_offset, node.end_col_offset  # type: ignore[attr-defined]
        except AttributeError:
            return None
        if first is None or last is None or end is None or last > len(self._lines):
            return None
        chunk = [line.encode("utf-8") for line in self._lines[first - 1 : last]]
        if len(chunk) == 1:
            return chunk[0][start:end].decode("utf-8", errors="replace")
        chunk[0], chunk[-1] = chunk[0][start:], chunk[-1][:end]
        return b"\n".join(chunk).decode("utf-8", errors="replace")


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
