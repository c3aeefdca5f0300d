"""The public surface: torchviz's make_dot signature, __all__, and drawing without torch."""

from __future__ import annotations

import importlib
import inspect
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import graphviz
import pytest
from core_corpus import build
from core_golden import GOLDEN_DIR
from manual import manual_text

import graphviz_app
from graphviz_app import make_dot, render, trace

README = Path(__file__).parents[1] / "README.md"

# What the README documents as the library: the shortest path, nothing more.
DOCUMENTED = ["trace", "render", "save", "make_dot", "Graph", "record", "trace_model", "record_orders", "diff",
              "assert_same_graph", "memory_timeline", "check_model", "compare"]



def test_package_exports_what_the_readme_documents() -> None:
    assert sorted(graphviz_app.__all__) == sorted(DOCUMENTED)
    assert dir(graphviz_app) == sorted(DOCUMENTED)
    for name in DOCUMENTED:
        assert getattr(graphviz_app, name) is not None
    assert graphviz_app.trace is importlib.import_module("graphviz_app.tracing.tracer").trace
    with pytest.raises(AttributeError, match="module 'graphviz_app' has no attribute 'tracer_'"):
        graphviz_app.tracer_  # noqa: B018


def test_readme_library_section_names_every_export() -> None:
    section = _readme_section("library")
    imports = re.search(r"`from graphviz_app import ([\w, ]+)`", section)
    assert imports is not None, "README's library section shows no `from graphviz_app import ...`"
    assert sorted(imports.group(1).split(", ")) == sorted(graphviz_app.__all__)
    for name in DOCUMENTED:
        assert f"`{name}" in section, f"README's library section does not document {name}"


@pytest.mark.filterwarnings("ignore:distutils Version classes:DeprecationWarning")
def test_make_dot_has_torchviz_signature() -> None:
    torchviz = importlib.import_module("torchviz")  # the reference answer, a dev dependency
    ours = [(p.name, p.kind, p.default) for p in inspect.signature(make_dot).parameters.values()]
    theirs = [(p.name, p.kind, p.default) for p in inspect.signature(torchviz.make_dot).parameters.values()]
    assert ours == theirs


@pytest.mark.parametrize(("show_attrs", "show_saved"), [(False, False), (True, False), (False, True), (True, True)])
def test_make_dot_is_a_drop_in(show_attrs: bool, show_saved: bool) -> None:
    case = build("mlp")
    dot = make_dot(case.outputs, case.params, show_attrs, show_saved)
    assert isinstance(dot, graphviz.Digraph)
    graph = trace(case.outputs, case.params, show_saved=show_saved, show_attrs=show_attrs)
    assert dot.source == render(graph, legend=False).source
    assert ("0.weight" in dot.source) and ("legend" not in dot.source)
    assert ("shape=note" in dot.source) is show_saved


def test_make_dot_cuts_attributes_at_max_attr_chars() -> None:
    case = build("seed_example")
    dot = make_dot(case.outputs, show_attrs=True, max_attr_chars=10)
    assert "self_sy...\\n" in dot.source


_BLOCKED = """
import sys
sys.modules["torch"] = None  # any import of torch now raises ImportError
import graphviz_app.model, graphviz_app.drawing.renderer
from graphviz_app import Graph, render, save
sys.path.insert(0, {here!r})
from core_handmade import three_devices

golden = {golden!r}
graph = Graph.from_json(open(golden + "/seed_example.json").read())
assert render(graph).source == open(golden + "/seed_example.dot").read()
assert render(three_devices()).source == open(golden + "/three_devices.dot").read()
svg = render(three_devices()).pipe(format="svg", encoding="utf-8")
assert "<svg" in svg and "cuda:1" in svg and "ToCopyBackward0" in svg
save(graph, {out!r})
try:
    graphviz_app.trace
except ImportError as e:
    print("trace needs torch:", e)
else:
    raise SystemExit("trace imported without torch")
assert sys.modules["torch"] is None
print("ok")
"""


def test_model_and_renderer_work_with_torch_blocked(tmp_path: Path) -> None:
    script = textwrap.dedent(_BLOCKED).format(
        here=str(Path(__file__).parent / "support"), golden=str(GOLDEN_DIR), out=str(tmp_path / "seed.svg")
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "ok"
    assert "trace needs torch" in done.stdout
    assert (tmp_path / "seed.svg").read_text().startswith("<?xml")


def _readme_section(name: str) -> str:
    text = manual_text()
    found = re.search(rf"<!-- section: {name} \(owner: core\) -->(.*?)<!-- end: {name} -->", text, re.S)
    assert found is not None, f"README.md lost its {name} section markers"
    return found.group(1)


def test_readme_quickstart_script_prints_what_it_says(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    blocks = re.findall(r"```python\n(.*?)```", _readme_section("quickstart"), re.S)
    assert blocks, "README.md's quickstart has no Python example"
    monkeypatch.chdir(tmp_path)
    exec(compile(blocks[0], "README.md quickstart", "exec"), {})  # noqa: S102
    printed = capsys.readouterr().out.splitlines()
    claimed = re.findall(r"print\(.*?\)\s+# (.+)", blocks[0])
    assert printed[-len(claimed):] == claimed
    assert [p.name for p in tmp_path.iterdir()] == ["seed.svg"]


def _signature_text(fn: object) -> str:
    parts: list[str] = []
    star = False
    for p in inspect.signature(fn).parameters.values():  # type: ignore[arg-type]
        if p.kind is p.KEYWORD_ONLY and not star:
            parts.append("*")
            star = True
        if p.kind is p.VAR_KEYWORD:
            parts.append(f"**{p.name}")
        else:
            default = f'"{p.default}"' if isinstance(p.default, str) else repr(p.default)
            parts.append(p.name if p.default is p.empty else f"{p.name}={default}")
    return f"{fn.__name__}({', '.join(parts)})"  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", ["trace", "render", "make_dot"])
def test_readme_signatures_match_the_code(name: str) -> None:
    section = _readme_section("library")
    assert f"`{_signature_text(getattr(graphviz_app, name))}" in section


@pytest.mark.slow  # a 12-layer encoder, traced with gradients and drawn
def test_readme_quickstart_real_model_draws_what_it_says(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    blocks = re.findall(r"```python\n(.*?)```", _readme_section("quickstart"), re.S)
    assert len(blocks) >= 2, "README.md's quickstart lost its real-model example"
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    exec(compile(blocks[0], "README.md quickstart", "exec"), namespace)  # noqa: S102
    exec(compile(blocks[1], "README.md quickstart, real model", "exec"), namespace)  # noqa: S102
    printed = capsys.readouterr().out
    assert "layers.0–11: TransformerEncoderLayer ×12" in (tmp_path / "encoder.svg").read_text(encoding="utf-8")
    assert "legend" in (tmp_path / "grads.svg").read_text(encoding="utf-8")
    assert "activations" in printed and "layers.11.self_attn" in printed
    graph = namespace["graph"]
    assert all(n.grad is not None for n in graph.nodes if n.kind.value == "op")  # type: ignore[attr-defined]


def test_the_readme_documents_the_layers_a_newcomer_sees() -> None:
    section = _readme_section("development")
    for package in ("tracing", "model", "analysis", "drawing", "runner", "expr", "web", "jobs", "cli"):
        assert f"`graphviz_app/{package}/`" in section, f"README's development section does not explain {package}/"
