"""docs/model_check.md's examples run, in order, as the file `model.py`, and print what the page says."""

from __future__ import annotations

import contextlib
import io
import linecache
import re
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[3] / "docs" / "model_check.md"


def test_the_page_s_examples_run_and_print_what_it_shows(monkeypatch: pytest.MonkeyPatch) -> None:
    text = PAGE.read_text(encoding="utf-8")
    code = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    shown = re.findall(r"```text\n(.*?)```", text, flags=re.S)
    assert len(code) == 2 and shown  # the first text block is what the first example prints
    namespace: dict[str, object] = {"__name__": "model"}
    printed = io.StringIO()
    for k, block in enumerate(code):
        name = "model.py" if k == 0 else f"model_{k}.py"
        # source lines of code run from a string: linecache is where tracebacks and the checker read them
        monkeypatch.setitem(linecache.cache, name, (len(block), None, block.splitlines(True), name))
        with contextlib.redirect_stdout(printed):
            exec(compile(block, name, "exec"), namespace)  # noqa: S102
    assert printed.getvalue() == shown[0]
