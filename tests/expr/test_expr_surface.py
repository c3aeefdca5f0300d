"""The public surface is what the README documents, and the README's examples run."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest
from manual import manual_text

import graphviz_app.expr as expr
from graphviz_app.cli.commands import build_parser

ROOT = Path(__file__).resolve().parents[2]


def _section() -> str:
    text = manual_text()
    start = text.index("<!-- section: expressions (owner: expr) -->")
    return text[start : text.index("<!-- end: expressions -->")]


def test_all_is_what_the_readme_lists() -> None:
    listed = re.search(r"`graphviz_app\.expr\.__all__`: (.*?)\.\n", _section(), re.S)
    assert listed is not None
    names = re.findall(r"`(\w+)`", listed.group(1))
    assert sorted(names) == sorted(expr.__all__)
    for name in expr.__all__:
        assert getattr(expr, name) is not None


def test_readme_python_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code = re.search(r"## From Python.*?```python\n(.*?)```", _section(), re.S)
    assert code is not None
    script = tmp_path / "example.py"
    script.write_text(code.group(1))
    monkeypatch.chdir(tmp_path)
    namespace = runpy.run_path(str(script))
    assert namespace["report"].passed
    assert (tmp_path / "seed.svg").read_text().lstrip().startswith("<?xml")


def test_readme_command_line_options_exist() -> None:
    documented = set(re.findall(r"(--[a-z][a-z-]+)", _section()))
    known = {opt for action in build_parser()._actions for opt in action.option_strings}
    for sub in ("render", "check", "serve"):
        parser = build_parser()._subparsers._group_actions[0].choices[sub]  # type: ignore[union-attr]
        known |= {opt for action in parser._actions for opt in action.option_strings}
    assert documented - known == set()
