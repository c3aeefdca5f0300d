"""`graphviz-app render g.json -o ...`: a saved graph drawn again, as the viewer or in any other format."""

from __future__ import annotations

import base64
import gzip
import json
import re
from pathlib import Path

import pytest
from mx_format import check_model_explorer
from viewer_support import chain_graph, module_graph

from graphviz_app import save
from graphviz_app.cli.commands import main
from graphviz_app.model import Graph


@pytest.fixture
def saved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return save(module_graph(3), tmp_path / "g.json")


def test_a_saved_graph_renders_to_the_viewer_file_whole(saved: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["render", "g.json", "-o", "g.html"]) == 0
    assert "wrote g.html (" in capsys.readouterr().out
    page = Path("g.html").read_text(encoding="utf-8")
    packed = re.search(r'id="gv-payload">([^<]*)</script>', page)
    assert packed is not None and "GraphvizAppViewer.mount" in page
    data = json.loads(gzip.decompress(base64.b64decode(packed.group(1))))
    assert Graph.from_dict(data["graph"]) == module_graph(3)  # not folded: the viewer folds it itself


@pytest.mark.parametrize(("output", "starts"), [
    ("g.svg", b"<?xml"),
    ("g.dot", b"digraph"),
    ("g.png", b"\x89PNG"),
    ("copy.json", b"{"),
])
def test_a_saved_graph_renders_to_any_other_format(saved: Path, output: str, starts: bytes) -> None:
    assert main(["render", "g.json", "-o", output]) == 0
    assert Path(output).read_bytes().startswith(starts)


def test_a_saved_graph_renders_to_model_explorer_json(saved: Path) -> None:
    assert main(["render", "g.json", "-o", "me.json", "--format", "model-explorer"]) == 0
    data = json.loads(Path("me.json").read_text(encoding="utf-8"))
    check_model_explorer(data)
    assert {n["namespace"] for n in data["graphs"][0]["nodes"]} >= {"blocks/0/fc", "head"}


def test_a_schema_1_file_still_renders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    old = chain_graph(6).to_dict()
    old["schema"] = 1
    Path("old.json").write_text(json.dumps(old), encoding="utf-8")
    assert main(["render", "old.json", "-o", "old.html"]) == 0
    assert 'id="gv-payload"' in Path("old.html").read_text(encoding="utf-8")


@pytest.mark.parametrize(("content", "words"), [
    (None, "no saved graph at bad.json: give the path of a .json file written by save(graph, 'g.json')"),
    ("{not json", "bad.json: not JSON"),
    ('{"schema": 9, "nodes": [], "edges": []}', 'expected a graph with "schema": 1, 2 or 3'),
    ("[" * 100_000 + "]" * 100_000, "bad.json: the JSON is nested too deeply to be a saved graph"),
])
def test_a_bad_saved_graph_gets_a_clear_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str], content: str | None,
                                                words: str) -> None:
    monkeypatch.chdir(tmp_path)
    if content is not None:
        Path("bad.json").write_text(content, encoding="utf-8")
    assert main(["render", "bad.json", "-o", "g.html"]) != 0
    assert words in capsys.readouterr().err
    assert not Path("g.html").exists()


def test_a_scripts_model_renders_to_the_viewer_with_its_modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    Path("model.py").write_text(
        "import torch\nfrom torch import nn\n\n"
        "def build():\n    return nn.Sequential(nn.Linear(3, 2), nn.ReLU()), torch.randn(4, 3)\n", encoding="utf-8")
    assert main(["render", "model.py:build", "-o", "model.html"]) == 0, capsys.readouterr().err
    page = Path("model.html").read_text(encoding="utf-8")
    packed = re.search(r'id="gv-payload">([^<]*)</script>', page)
    assert packed is not None
    graph = Graph.from_dict(json.loads(gzip.decompress(base64.b64decode(packed.group(1))))["graph"])
    assert {m.name: m.type for m in graph.modules} == {"": "Sequential", "0": "Linear", "1": "ReLU"}
    assert any(n.name == "AddmmBackward0" and n.module == "0" for n in graph.nodes)


def test_a_saved_graph_over_the_size_limit_is_refused_before_it_is_read(
        saved: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import graphviz_app.cli.saved as cli_saved

    size = saved.stat().st_size
    monkeypatch.setattr(cli_saved, "MAX_SAVED_BYTES", 100)
    monkeypatch.setattr(Path, "read_text", lambda *a, **k: pytest.fail("read a file over the limit"))
    assert main(["render", "g.json", "-o", "g.html"]) != 0
    assert f"g.json is {size:,} bytes, more than the 100 a saved graph may have" in capsys.readouterr().err
