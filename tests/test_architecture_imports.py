"""What loads with what: the model alone, a lazy package facade, the model's doors up, no private names across packages.

Modules are found with `pkgutil` and their imports read with `ast`; nothing here lists files.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import pkgutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

import gradcheck
import graphviz_app

ROOT = Path(__file__).resolve().parents[1]
MODEL = "graphviz_app.model"
# Marks a lazy import in a convenience method of the model (as tests/test_architecture.py reads it).
DOOR = "# door up"


@cache
def modules() -> tuple[str, ...]:
    """Every module and package of both packages, `__main__` scripts left out."""
    found = ["graphviz_app", "gradcheck"]
    for package in (graphviz_app, gradcheck):
        found += [info.name for info in pkgutil.walk_packages(package.__path__, package.__name__ + ".")
                  if not info.name.endswith("__main__")]
    return tuple(sorted(found))


def _path(module: str) -> Path:
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None, module
    return Path(spec.origin)


def _package_of(module: str) -> str:
    """The package a module's code sits in: itself for a package, else its parent."""
    return module if _path(module).name == "__init__.py" else module.rpartition(".")[0]


def _loaded_after(statement: str) -> list[str]:
    """The modules of both packages, and `graphviz` and `torch`, loaded in a fresh interpreter by `statement`."""
    ours = ("graphviz_app", "gradcheck", "graphviz", "torch")
    script = "\n".join([
        "import sys", statement,
        f"print('\\n'.join(sorted(m for m in sys.modules if m.partition('.')[0] in {ours!r})))",
    ])
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.split()


@pytest.mark.parametrize("module", [m for m in modules() if m == MODEL or m.startswith(MODEL + ".")])
def test_the_model_loads_alone(module: str) -> None:
    loaded = _loaded_after(f"import {module}")
    beyond = [m for m in loaded if m not in ("graphviz_app", "graphviz_app.errors")
              and not m.startswith(MODEL + ".") and m != MODEL]
    packages = sorted({m if m.startswith("graphviz_app.") else m.partition(".")[0] for m in beyond})
    assert module in loaded and beyond == [], f"import {module} also loads {packages}"


def test_the_package_facade_loads_nothing_until_a_name_is_used() -> None:
    assert _loaded_after("import graphviz_app") == ["graphviz_app"]
    loaded = _loaded_after("from graphviz_app import Graph")
    assert MODEL in loaded
    assert [m for m in loaded if m.partition(".")[0] != "graphviz_app" or m.startswith("graphviz_app.drawing")] == []


def test_a_door_up_opens_when_its_method_is_called() -> None:
    loaded = _loaded_after(
        "import graphviz_app.model as m\n"
        "g = m.Graph((m.Node('n0', m.NodeKind.OUTPUT, 'out'),), ())\n"
        "assert g.summary().nodes == 1 and len(g.module_summary().rows) == 0"
    )
    assert "graphviz_app.analysis.summary" in loaded and "graphviz_app.analysis.module_summary" in loaded
    assert "graphviz" not in loaded and "torch" not in loaded  # the analyses need neither


def test_every_facade_name_is_the_object_of_its_home() -> None:
    typed = _type_checking_imports(_path("graphviz_app"))
    assert sorted(typed) == sorted(graphviz_app.__all__), "the TYPE_CHECKING imports and __all__ differ"
    for name, home in typed.items():
        assert getattr(graphviz_app, name) is getattr(importlib.import_module(home), name), name
    with pytest.raises(AttributeError, match="module 'graphviz_app' has no attribute 'renderer'"):
        graphviz_app.renderer  # noqa: B018 - the old flat paths are gone


def _type_checking_imports(path: Path) -> dict[str, str]:
    """Name -> module, for the `from .x import name` lines under `if TYPE_CHECKING:`."""
    found: dict[str, str] = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for statement in node.body:
                assert isinstance(statement, ast.ImportFrom) and statement.level == 1, ast.dump(statement)
                found.update({alias.name: f"graphviz_app.{statement.module}" for alias in statement.names})
    return found


def _imports(module: str) -> list[tuple[ast.Import | ast.ImportFrom, list[str], bool]]:
    """Each import statement of `module`, the full dotted names it imports, and whether it sits in a function."""
    tree = ast.parse(_path(module).read_text(encoding="utf-8"))
    here = _package_of(module)
    found: list[tuple[ast.Import | ast.ImportFrom, list[str], bool]] = []
    todo: list[tuple[ast.AST, bool]] = [(tree, False)]
    while todo:
        node, in_function = todo.pop()
        if isinstance(node, ast.Import):
            found.append((node, [alias.name for alias in node.names], in_function))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.rsplit(".", node.level - 1)[0] if node.level > 1 else here
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module or ""
            found.append((node, [f"{source}.{alias.name}" for alias in node.names], in_function))
        inside = in_function or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        todo.extend((child, inside) for child in ast.iter_child_nodes(node))
    return found


def _private_owner(name: str) -> str | None:
    """The package a dotted name is private to (`graphviz_app.analysis` for `...analysis.collapse._runs`), if any."""
    parts = name.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            holder = ".".join(parts[:i])
            return holder if holder in modules() and _path(holder).name == "__init__.py" else _package_of(holder)
    return None


def test_no_private_name_is_imported_across_packages() -> None:
    ours = ("graphviz_app", "gradcheck")
    crossing = []
    for module in modules():
        importer = _package_of(module)
        for node, names, _ in _imports(module):
            for name in names:
                owner = _private_owner(name) if name.partition(".")[0] in ours else None
                if owner is not None and importer != owner and not importer.startswith(owner + "."):
                    crossing.append(f"{module}:{node.lineno} imports {name} (private to {owner})")
    assert not crossing, "private names used outside their package; make them public API:\n" + "\n".join(crossing)


def test_the_doors_up_are_lazy_imports_in_the_model_alone() -> None:
    doors = []
    for module in modules():
        lines = _path(module).read_text(encoding="utf-8").splitlines()
        for node, names, in_function in _imports(module):
            if DOOR not in lines[node.lineno - 1]:
                continue
            assert module.startswith(MODEL + "."), f"{module}:{node.lineno}: a door up outside the model"
            assert in_function, f"{module}:{node.lineno}: a door up must be imported inside its method, on use"
            for name in names:
                home, _, attr = name.rpartition(".")
                assert hasattr(importlib.import_module(home), attr), f"{module}:{node.lineno}: {name} is missing"
                doors.append(name)
    assert "graphviz_app.analysis.summary.summarize" in doors  # the marker is found where it is used


def test_the_model_never_imports_by_a_string() -> None:
    """A module path in a string (`import_module("graphviz_app.analysis...")`) hides an arrow from the checks above."""
    found = []
    for module in modules():
        if module != MODEL and not module.startswith(MODEL + "."):
            continue
        for node in ast.walk(ast.parse(_path(module).read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                if called in ("import_module", "__import__", "find_spec"):
                    found.append(f"{module}:{node.lineno}: {called}()")
    assert not found, "the model imports by name at run time: " + ", ".join(found)
