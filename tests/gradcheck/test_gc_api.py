"""The public surface: what the README documents is what the package exports."""

from __future__ import annotations

import ast
import importlib
import inspect
import pathlib
import pkgutil

import pytest

import gradcheck
from gradcheck import check
from gradcheck._state import CheckOptions

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def _readme_section() -> str:
    text = README.read_text()
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
