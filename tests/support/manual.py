"""The manual as the tests read it: README.md and docs/*.md, their sections and their code blocks."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Block", "PAGES", "ROOT", "code_blocks", "manual_text", "section"]

ROOT = Path(__file__).resolve().parents[2]
PAGES = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))

_FENCE = re.compile(r"^( *)(`{3,})(.*)$")  # a fence may be indented (inside a list item)


@dataclass(frozen=True)
class Block:
    """One fenced code block: where it starts (1-based line of its fence), its info string and text.

    `output` is the text of the block right after it when that block's info string says
    `title="Output"`: what the text shows the code prints.
    """

    page: Path
    line: int
    info: str
    code: str
    output: str | None = None

    @property
    def language(self) -> str:
        return self.info.split(" ", 1)[0].strip().lower()

    @property
    def where(self) -> str:
        page = self.page.relative_to(ROOT) if self.page.is_relative_to(ROOT) else self.page
        return f"{page}:{self.line}"


def manual_text() -> str:
    """Every page of the manual, README.md first, one after another."""
    return "\n".join(page.read_text(encoding="utf-8") for page in PAGES)


def section(name: str) -> str:
    """The text between `<!-- section: NAME ... -->` and `<!-- end: NAME -->`, on whichever page holds it."""
    text = manual_text()
    found = re.search(rf"<!-- section: {re.escape(name)}\b.*?-->(.*?)<!-- end: {re.escape(name)} -->", text, re.S)
    assert found is not None, f"no page of the manual (README.md, docs/) has the section markers of {name!r}"
    return found.group(1)


def code_blocks(page: Path) -> list[Block]:
    """The fenced code blocks of a page, in order, each with the output block that follows it."""
    lines = page.read_text(encoding="utf-8").split("\n")
    raw: list[tuple[int, int, str, str]] = []  # (first line, last line, info, text)
    i = 0
    while i < len(lines):
        opened = _FENCE.match(lines[i])
        if opened is None:
            i += 1
            continue
        indent, fence, info = opened.group(1), opened.group(2), opened.group(3).strip()
        end = next((j for j in range(i + 1, len(lines)) if lines[j].rstrip() == indent + fence), None)
        assert end is not None, f"{page}:{i + 1}: a code block is never closed"
        body = [line[len(indent) :] if line.startswith(indent) else line.lstrip() for line in lines[i + 1 : end]]
        raw.append((i + 1, end + 1, info, "\n".join(body) + "\n"))
        i = end + 1
    blocks = []
    for k, (first, last, info, text) in enumerate(raw):
        output = None
        if k + 1 < len(raw):
            nxt_first, _, nxt_info, nxt_text = raw[k + 1]
            between = lines[last : nxt_first - 1]
            if 'title="Output"' in nxt_info and not any(line.strip() for line in between):
                output = nxt_text
        blocks.append(Block(page, first, info, text, output))
    return blocks
