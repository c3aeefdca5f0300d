"""The public surface: what the README documents is what the package exports."""

from __future__ import annotations

import ast
import importlib
import inspect
import pathlib
import pkgutil

import pytest
from manual import manual_text

import gradcheck
from gradcheck import check
from gradcheck._state import CheckOptions

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def _readme_section() -> str:
    text = manual_text()
    start = text.index("<!-- section: gradcheck (owner: gradcheck) -->")
    return text[start : text.index("<!-- end: gradcheck -->", start)]


def test_all_is_what_the_readme_documents() -> None:
    section = _readme_section()
    block = section[section.index("from gradcheck import (") :]
    block = block[: block.index(")") + 1]
    documented = {alias.name for alias in ast.parse(block).body[0].names}  # type: ignore[attr-defined]

    assert documented == set(gradcheck.__all__)


@pytest.mark.parametrize("name", gradcheck.__all__)
def test_every_public_name_imports(name: str) -> None:
    assert getattr(gradcheck, name) is not None


def test_an_unknown_name_is_an_attribute_error_listing_the_public_ones() -> None:
    with pytest.raises(
        AttributeError, match=r"module 'gradcheck' has no attribute 'chek'; its public names are"
    ):
        gradcheck.chek  # noqa: B018


MODULES = [m.name for m in pkgutil.iter_modules(gradcheck.__path__)]


@pytest.mark.parametrize("module", MODULES)
def test_every_module_declares_all(module: str) -> None:
    mod = importlib.import_module(f"gradcheck.{module}")

    assert isinstance(mod.__all__, list) and all(hasattr(mod, n) for n in mod.__all__)


def test_check_defaults_are_the_options_defaults() -> None:
    params = inspect.signature(check).parameters
    for name, field in CheckOptions.__dataclass_fields__.items():
        assert params[name].default == field.default, name
        assert params[name].kind is inspect.Parameter.KEYWORD_ONLY


def _code_blocks(section: str) -> list[str]:
    parts = section.split("```python\n")[1:]
    return [p[: p.index("```")] for p in parts]


def test_the_readme_script_prints_the_factor_three_report(
    capsys: pytest.CaptureFixture[str],
) -> None:
    script = next(b for b in _code_blocks(_readme_section()) if "print(report)" in b)
    namespace: dict[str, object] = {}

    exec(script, namespace)  # noqa: S102 - the README's own example

    report = namespace["report"]
    assert report.passed is False  # type: ignore[attr-defined]
    assert "expected = 3 x autograd at every failing element (3 of 3)" in capsys.readouterr().out


def test_the_readme_pytest_example_passes_with_the_fixture(gradcheck: object) -> None:
    block = next(b for b in _code_blocks(_readme_section()) if "def test_seed_gradient" in b)
    namespace: dict[str, object] = {}
    exec(block, namespace)  # noqa: S102 - the README's own example

    assert len(block.strip().splitlines()) <= 6
    namespace["test_seed_gradient"](gradcheck)  # type: ignore[operator]  # raises if it fails


@pytest.mark.parametrize("module", ["checker", "assertions"])
def test_docstring_examples_run(module: str) -> None:
    import doctest

    result = doctest.testmod(importlib.import_module(f"gradcheck.{module}"))

    assert result.attempted > 0 and result.failed == 0


def _imports_of(module: str) -> set[str]:
    """The gradcheck modules `module` imports anywhere in its source, lazily inside functions too."""
    path = pathlib.Path(gradcheck.__path__[0]) / f"{module}.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            found |= {node.module} if node.module else {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gradcheck."):
            found.add(node.module.split(".")[1])  # type: ignore[union-attr]
    return found & set(MODULES)


def test_the_modules_import_each_other_without_a_circle() -> None:
    graph = {m: _imports_of(m) for m in MODULES}
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        assert module not in path, f"import circle: {' -> '.join((*path, module))}"
        if module in done:
            return
        for imported in sorted(graph[module]):
            visit(imported, (*path, module))
        done.add(module)

    for module in MODULES:
        visit(module, ())
    assert "_format" not in graph["report"] and "report" in graph["_format"]


def test_the_report_text_needs_no_torch() -> None:
    code = (
        "import sys\n"
        "sys.modules['torch'] = None  # any import of torch fails\n"
        "from gradcheck.report import Report\n"
        "import gradcheck._format\n"
        "print('ok')\n"
    )
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(README.parent)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert out.stdout.strip() == "ok", out.stderr
