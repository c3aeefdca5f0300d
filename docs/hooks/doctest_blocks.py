"""A griffe extension for the API reference: a docstring's bare doctest is shown as a code block.

The package's docstrings end with a doctest where it is cheap (`>>> ...` and its output, at the
docstring's own indentation, outside any "Examples:" section). Rendered as Markdown, such lines
are prose, and their output's brackets (`['MeanBackward0', ...]`, `data["kind"][:3]`) read as
cross-references that do not exist. This wraps each run of them in a `pycon` fence, unchanged.
"""

from __future__ import annotations

from typing import Any

import griffe

__all__ = ["DoctestBlocks", "fence_doctests"]


def fence_doctests(text: str) -> str:
    """`text` with every run of `>>>` lines at column 0, and the output after them, in a pycon fence.

    >>> fence_doctests("Sum.\\n\\n>>> 1 + 1\\n2\\n\\nMore.").split("\\n")
    ['Sum.', '', '```pycon', '>>> 1 + 1', '2', '```', '', 'More.']
    """
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        if not lines[i].startswith(">>>"):
            out.append(lines[i])
            i += 1
            continue
        block = []
        while i < len(lines) and lines[i].strip():  # a doctest runs until a blank line
            block.append(lines[i])
            i += 1
        out += ["```pycon", *block, "```"]
    return "\n".join(out)


class DoctestBlocks(griffe.Extension):
    """Fence the bare doctests of every docstring griffe loads."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None and ">>>" in obj.docstring.value:
            obj.docstring.value = fence_doctests(obj.docstring.value)
