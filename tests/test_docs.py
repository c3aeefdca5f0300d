"""Every Python block of the manual (README.md, docs/*.md) runs, and prints what the text shows it prints.

A page's blocks run in order in one namespace (as in a notebook), in a
temporary folder, so the files they save land there. A block followed by a
block titled "Output" (```` ```text title="Output" ````) must print that text;
`...` in it stands for any text, as in a doctest. A block titled "Program" is
a program of the expression language: it must evaluate without an error.
"""

from __future__ import annotations

import contextlib
import doctest
import io
from pathlib import Path

import pytest
from manual import PAGES, ROOT, Block, code_blocks

PYTHON = {"python", "py"}
_CHECKER = doctest.OutputChecker()


def _python_blocks(page: Path) -> list[Block]:
    return [b for b in code_blocks(page) if b.language in PYTHON]


def _shown(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip("\n").split("\n")) + "\n"


def _run(block: Block, namespace: dict[str, object]) -> str:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        if 'title="Program"' in block.info:
            from graphviz_app.expr import evaluate

            evaluate(block.code, isolated=False)
        else:
            exec(compile(block.code, block.where, "exec"), namespace)  # noqa: S102 - the manual's own example
    return printed.getvalue()


# Pages whose examples take more than a few seconds (torch.compile, a 6-layer encoder in the language, ranks).
SLOW = {"docs/tracing.md", "docs/expressions.md", "docs/distributed.md"}
PAGES_WITH_CODE = [
    pytest.param(page, id=name, marks=[pytest.mark.slow] if name in SLOW else [])
    for page in PAGES
    if _python_blocks(page)
    for name in [str(page.relative_to(ROOT))]
]


@pytest.mark.parametrize("page", PAGES_WITH_CODE)
def test_every_python_block_runs_and_prints_what_the_page_shows(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "__main__"}
    for block in _python_blocks(page):
        printed = _run(block, namespace)
        if block.output is not None:
            want, got = _shown(block.output), _shown(printed)
            assert _CHECKER.check_output(want, got, doctest.ELLIPSIS), (
                f"{block.where}: the block printed\n{got}\nbut the page shows\n{want}"
            )


def test_the_manual_has_python_blocks_and_shown_output() -> None:
    blocks = [b for page in PAGES for b in _python_blocks(page)]
    assert len(blocks) >= 20 and sum(b.output is not None for b in blocks) >= 5


def test_readme_is_short_and_links_into_the_manual() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    linked = {part.split(")")[0] for part in text.split("](docs/")[1:]}
    assert linked and all((ROOT / "docs" / name.split("#")[0]).is_file() for name in linked), linked


def test_output_is_compared_line_by_line_with_ellipsis(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        'Text.\n\n```python\nprint("peak 113.0 KiB while n8 runs")\n```\n\n'
        '```text title="Output"\npeak ... while n8 runs\n```\n\n'
        '```python\nprint(1 + 1)\n```\n\n```text title="Output"\n3\n```\n\n```bash\nmake test\n```\n',
        encoding="utf-8",
    )
    blocks = _python_blocks(page)
    assert [(b.line, b.output) for b in blocks] == [(3, "peak ... while n8 runs\n"), (11, "3\n")]
    printed = [_run(block, {}) for block in blocks]
    assert _CHECKER.check_output(_shown(blocks[0].output or ""), _shown(printed[0]), doctest.ELLIPSIS)
    assert not _CHECKER.check_output(_shown(blocks[1].output or ""), _shown(printed[1]), doctest.ELLIPSIS)
