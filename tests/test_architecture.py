"""The architecture, checked from the code itself: layers, the import graph, public names, doctests.

Every module of `graphviz_app` and `gradcheck` is found with `pkgutil`; nothing here lists files.
The import graph is read from the source (every `import` statement, those inside functions and
under `TYPE_CHECKING` included), so a lazy import cannot hide an arrow.
"""

from __future__ import annotations

import ast
import doctest
import importlib
import pkgutil
import re
import subprocess
import sys
import textwrap
from functools import cache
from pathlib import Path

import pytest

import gradcheck
import graphviz_app

ROOT = Path(__file__).resolve().parents[1]

# Layers, bottom first: a module may import its own layer and the layers listed for it.
# A module belongs to the longest prefix that matches its name.
LAYERS: dict[str, frozenset[str]] = {
    "graphviz_app.errors": frozenset(),
    # The process pool: generic, no torch, no expression language; its own errors below the package's.
    "graphviz_app.runner": frozenset({"graphviz_app.errors"}),
    "graphviz_app.model": frozenset({"graphviz_app.errors"}),
    "graphviz_app.analysis": frozenset({"graphviz_app.model", "graphviz_app.errors"}),
    # The interactive viewer's payload and page: plain data for the browser, beside the drawing.
    "graphviz_app.viewer": frozenset({"graphviz_app.analysis", "graphviz_app.model", "graphviz_app.errors"}),
    "graphviz_app.drawing": frozenset({
        "graphviz_app.viewer", "graphviz_app.analysis", "graphviz_app.model", "graphviz_app.errors",
    }),
    # The torch side builds the model; the gradient replay states its findings through the
    # gradient report's records.
    "graphviz_app.tracing": frozenset({"graphviz_app.analysis", "graphviz_app.model", "graphviz_app.errors"}),
    # Checking a model's backward module by module composes the tracer with the gradient checker.
    "graphviz_app.tracing.model_check": frozenset({
        "graphviz_app.tracing", "graphviz_app.analysis", "graphviz_app.model", "graphviz_app.errors", "gradcheck",
    }),
    "graphviz_app.expr": frozenset({
        "graphviz_app.runner", "graphviz_app.tracing", "graphviz_app.model", "graphviz_app.errors",
    }),
    # The web server: no torch, no tracer, never the worker side (it names jobs by reference).
    "graphviz_app.web": frozenset({
        "graphviz_app.runner", "graphviz_app.viewer", "graphviz_app.drawing", "graphviz_app.analysis",
        "graphviz_app.model", "graphviz_app.errors", "graphviz_app.expr",
    }),
    # The CLI parses and prints; what needs torch runs in a worker (the jobs, named by reference).
    "graphviz_app.cli": frozenset({
        "graphviz_app.web", "graphviz_app.runner", "graphviz_app.viewer", "graphviz_app.drawing",
        "graphviz_app.analysis", "graphviz_app.model", "graphviz_app.errors", "graphviz_app.expr", "gradcheck",
    }),
    # What runs in the worker processes for the page and the CLI: the top; nothing imports it
    # (the page and the CLI name its jobs by reference).
    "graphviz_app.jobs": frozenset({
        "graphviz_app.web", "graphviz_app.runner", "graphviz_app.viewer", "graphviz_app.drawing",
        "graphviz_app.analysis", "graphviz_app.model", "graphviz_app.errors", "graphviz_app.expr",
        "graphviz_app.tracing", "graphviz_app.tracing.model_check", "gradcheck",
    }),
    # The package itself and its top-level glue (make_dot, old module paths) compose the layers.
    "graphviz_app": frozenset({
        "graphviz_app.viewer", "graphviz_app.drawing", "graphviz_app.analysis", "graphviz_app.model",
        "graphviz_app.errors", "graphviz_app.tracing", "graphviz_app.tracing.model_check",
    }),
    "gradcheck": frozenset(),
}
# Layers that never load torch: imported in a process where `import torch` fails.
TORCH_FREE = ("graphviz_app.errors", "graphviz_app.runner", "graphviz_app.model", "graphviz_app.analysis",
              "graphviz_app.viewer", "graphviz_app.drawing",
              "graphviz_app.web", "graphviz_app.cli")
# Modules above the layers that must load without torch too (the package, the CLI's parser, the language's
# validator, what the page calls on every keystroke).
TORCH_FREE_MODULES = ("graphviz_app", "graphviz_app.compat", "graphviz_app.expr",
                      "graphviz_app.expr.validator", "graphviz_app.expr.rehearsal", "gradcheck", "gradcheck.errors",
                      "gradcheck.pytest_plugin")
WORKER = "graphviz_app.jobs"
# Marks a lazy import in a convenience method of the model (`Graph.summary()`): not an arrow of the layers.
DOOR = "# door up"


@cache
def modules() -> tuple[str, ...]:
    """Every module and package of both packages, `__main__` scripts left out."""
    found = ["graphviz_app", "gradcheck"]
    for package in (graphviz_app, gradcheck):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if not info.name.endswith("__main__"):
                found.append(info.name)
    return tuple(sorted(found))


def _path(module: str) -> Path:
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None, module
    return Path(spec.origin)


def _is_package(module: str) -> bool:
    return _path(module).name == "__init__.py"


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_statements(tree: ast.AST) -> list[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement, and whether it sits under `if TYPE_CHECKING:` (read by type checkers only)."""
    found: list[tuple[ast.Import | ast.ImportFrom, bool]] = []
    todo: list[tuple[ast.AST, bool]] = [(tree, False)]
    while todo:
        node, typing_only = todo.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append((node, typing_only))
        for child in ast.iter_child_nodes(node):
            under = typing_only or (isinstance(node, ast.If) and _is_type_checking(node.test) and child in node.body)
            todo.append((child, under))
    return found


@cache
def _edges() -> dict[str, tuple[frozenset[str], frozenset[str]]]:
    """Module -> (modules imported at run time, modules imported for type checking only)."""
    known = set(modules())
    edges: dict[str, tuple[frozenset[str], frozenset[str]]] = {}
    for module in modules():
        source = _path(module).read_text(encoding="utf-8")
        tree = ast.parse(source)
        lines = source.splitlines()
        here = module if _is_package(module) else module.rpartition(".")[0]
        runtime: set[str] = set()
        typing_only: set[str] = set()
        for node, only_typing in _import_statements(tree):
            if DOOR in lines[node.lineno - 1]:
                continue  # one of the model's doors up; tests/test_architecture_imports.py checks where they are
            targets = typing_only if only_typing else runtime
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
                continue
            if node.level:
                base = here.rsplit(".", node.level - 1)[0] if node.level > 1 else here
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module or ""
            for alias in node.names:  # `from pkg import submodule` imports the submodule
                sub = f"{source}.{alias.name}"
                targets.add(sub if sub in known else source)
        edges[module] = (frozenset(runtime & known - {module}), frozenset(typing_only & known - {module}))
    return edges


def import_graph(*, typing_only: bool = True) -> dict[str, frozenset[str]]:
    """Module -> the modules of both packages it imports, lazy ones included (and type-only ones, unless told not)."""
    return {m: run | (types if typing_only else frozenset()) for m, (run, types) in _edges().items()}


def layer(module: str) -> str:
    matches = [name for name in LAYERS if module == name or module.startswith(name + ".")]
    return max(matches, key=len)


def test_discovery_finds_the_layers() -> None:
    found = {layer(m) for m in modules()}
    assert found == set(LAYERS), f"layers without modules: {set(LAYERS) - found}"
    assert "graphviz_app.tracing.walker" in modules() and f"{WORKER}.programs" in modules()
    assert "graphviz_app.runner.pool" in modules()


def test_the_import_graph_has_no_cycle() -> None:
    graph = import_graph()
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in graph:
        if state.get(start):
            continue
        path, stack = [start], [iter(sorted(graph[start]))]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                cycle = path[path.index(nxt):] + [nxt]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            elif not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph[nxt])))
    assert len(graph) == len(modules()) and all(state[m] == 2 for m in graph)  # every module walked to its end


@pytest.mark.parametrize("module", modules())
def test_imports_go_down_the_layers(module: str) -> None:
    own = layer(module)
    allowed = LAYERS[own] | {own}
    wrong = sorted(t for t in import_graph()[module] if layer(t) not in allowed)
    assert not wrong, f"{module} (layer {own}) imports {wrong}; {own} may import only {sorted(allowed)}"


def _reached(start: list[str]) -> set[str]:
    """Every module `start` loads when it runs (`if TYPE_CHECKING:` imports never do)."""
    graph = import_graph(typing_only=False)
    seen, todo = set(start), list(start)
    while todo:
        for target in graph[todo.pop()]:
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


# The worker side: the jobs, the tracer, the checker (the checker's torch-free errors excepted).
def _worker_side(module: str) -> bool:
    return module.startswith((WORKER, "graphviz_app.tracing", "gradcheck")) and module != "gradcheck.errors"


def test_the_server_side_never_reaches_the_worker_or_the_tracer() -> None:
    server = [m for m in modules() if layer(m) == "graphviz_app.web"]
    reached = sorted(m for m in _reached(server) if _worker_side(m))
    assert not reached, f"the web server's modules reach {reached}"


def test_the_cli_s_parsing_and_printing_never_reach_the_worker_side() -> None:
    # The CLI parses, names its jobs (`cli.worker`) and prints: the person's script and program run in a worker.
    front = [m for m in modules() if layer(m) == "graphviz_app.cli"]
    assert "graphviz_app.cli.commands" in front and "graphviz_app.cli.memory" in front
    reached = sorted(m for m in _reached(front) if _worker_side(m))
    assert not reached, f"the CLI's parsing and printing modules reach {reached}"


def test_nothing_imports_the_jobs_but_the_jobs() -> None:
    graph = import_graph()
    found = sorted(f"{m} -> {t}" for m, targets in graph.items() for t in targets
                   if layer(t) == WORKER and layer(m) != WORKER)
    assert not found, f"the jobs are named by reference (runner.JobRef), never imported: {found}"


def test_every_job_the_page_and_the_cli_name_is_a_worker_function() -> None:
    from graphviz_app.cli import worker
    from graphviz_app.web import service

    for job in (*service.JOBS, worker.TRACE_JOB, worker.CHECK_JOB, worker.SCRIPT_JOB, worker.MEMORY_JOB):
        assert job.module.startswith(WORKER + "."), job
        assert callable(job.resolve()), job


@pytest.mark.parametrize("module", modules())
def test_all_lists_only_names_the_module_has(module: str) -> None:
    mod = importlib.import_module(module)
    names = getattr(mod, "__all__", None)
    if names is None:
        assert _is_package(module), f"{module} has no __all__"
        return
    assert isinstance(names, list | tuple), f"{module}.__all__ is a {type(names).__name__}"
    assert len(set(names)) == len(names), f"{module}.__all__ repeats a name"
    assert [n for n in names if not hasattr(mod, n)] == [], f"{module}.__all__ names what it lacks"


@pytest.mark.parametrize("module", modules())
def test_docstring_examples_hold(module: str) -> None:
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {module} failed"


def test_the_torch_free_layers_load_with_torch_blocked() -> None:
    wanted = [m for m in modules() if layer(m) in TORCH_FREE or m in TORCH_FREE_MODULES]
    script = textwrap.dedent(f"""
        import importlib, sys
        sys.modules["torch"] = None  # any import of torch now raises ImportError
        for name in {wanted!r}:
            importlib.import_module(name)
        loaded = sorted(m for m in sys.modules if m.startswith(({WORKER!r}, "graphviz_app.tracing")))
        assert not loaded, loaded
        print("ok", len({wanted!r}))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["ok", str(len(wanted))]


# A private name of torch: a path through a private module (torch._C, torch.utils._python_dispatch)
# or a private attribute of its tensors and autograd nodes.
_PRIVATE_TORCH = re.compile(
    r"\btorch(?:\.\w+)*\._[A-Za-z]\w*"
    r"|(?<!self)\.(?:_saved_|_raw_saved_)\w*"
    r"|\.(?:_is_view|_base|_version|_cdata|_modules|_sequence_nr|_input_metadata|_forward_cls"
    r"|_lazy_backward_info|_overloadpacket|_backward_hooks|_forward_hooks|_parameters|_buffers"
    r"|_engine_run_backward|_aot_id|_get_sequence_nr)\b"
)
INTERNALS = "graphviz_app.tracing.torch_internals"


def test_private_torch_names_are_read_in_one_module() -> None:
    found = []
    for module in modules():
        if not module.startswith("graphviz_app.") or module == INTERNALS or module.startswith(INTERNALS + "."):
            continue
        for number, line in enumerate(_path(module).read_text(encoding="utf-8").splitlines(), start=1):
            code = line.split("#", 1)[0]
            for match in _PRIVATE_TORCH.finditer(code):
                found.append(f"{module}:{number}: {match.group(0)}")
    assert not found, f"private torch names outside {INTERNALS}:\n" + "\n".join(found)


def test_no_history_in_names_or_comments() -> None:
    pattern = re.compile(r"issue \d|issue-\d|issue_\d", re.IGNORECASE)
    found = []
    for folder in ("graphviz_app", "gradcheck", "tests"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
                if pattern.search(line) and path.name != Path(__file__).name:
                    found.append(f"{path.relative_to(ROOT)}:{number}")
    assert not found, "issue numbers in code or tests: " + ", ".join(found)
