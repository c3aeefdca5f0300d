"""`graphviz-app render ... -o g.html --overlay NAME=FILE.json`: your own numbers as a colouring of the viewer."""

from __future__ import annotations

import base64
import gzip
import json
import re
from pathlib import Path

import pytest
from viewer_support import HOSTILE, module_graph

from graphviz_app import save
from graphviz_app.cli.commands import main


@pytest.fixture
def saved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return save(module_graph(3), tmp_path / "g.json")


def _overlays(page: Path) -> dict[str, dict]:
    packed = re.search(r'id="gv-payload">([^<]*)</script>', page.read_text(encoding="utf-8"))
    assert packed is not None
    data = json.loads(gzip.decompress(base64.b64decode(packed.group(1))))
    return {o["label"]: o for o in data["overlays"]}


def test_overlay_files_become_colourings_by_node_and_by_module(saved: Path) -> None:
    Path("lat.json").write_text(json.dumps({"n1": 2.5, "blocks.0": 7}), encoding="utf-8")
    Path("odd.json").write_text(json.dumps({"n2": 1.0}), encoding="utf-8")
    name = HOSTILE[0]  # shown as text: the payload is base64, the menu sets textContent
    args = ["render", "g.json", "-o", "g.html", "--overlay", "latency_ms=lat.json", "--overlay", f"{name}=odd.json"]
    assert main(args) == 0
    found = _overlays(Path("g.html"))
    assert found["latency_ms"]["node"][1] == 2.5 and 7.0 in found["latency_ms"]["group"]
    assert found[name]["node"][2] == 1.0
    assert "<script>window.__pwned" not in Path("g.html").read_text(encoding="utf-8")


@pytest.mark.parametrize(("args", "file", "words"), [
    (["-o", "g.svg", "--overlay", "a=o.json"], '{"n1": 1}', r"--overlay colours the interactive viewer: end .*\.html"),
    (["-o", "g.html", "--overlay", "a"], '{"n1": 1}', r"--overlay takes NAME=FILE.json"),
    (["-o", "g.html", "--overlay", "a=missing.json"], '{"n1": 1}', r"cannot read the --overlay file for 'a'"),
    (["-o", "g.html", "--overlay", "a=o.json"], "{not json", r"--overlay a: o.json is not JSON"),
    (["-o", "g.html", "--overlay", "a=o.json"], "[1, 2]", r"o.json holds a JSON list"),
    (["-o", "g.html", "--overlay", "a=o.json"], '{"n999": 1}', r"--overlay: overlay 'a': 'n999' is neither a node id"),
    (["-o", "g.html", "--overlay", "a=o.json"], '{"n1": "fast"}', r"the value must be a finite number"),
])
def test_a_bad_overlay_says_what_is_wrong(saved: Path, capsys: pytest.CaptureFixture[str], args: list[str], file: str,
                                          words: str) -> None:
    Path("o.json").write_text(file, encoding="utf-8")
    assert main(["render", "g.json", *args]) != 0
    assert re.search(words, capsys.readouterr().err), words
    assert not Path(args[1]).exists()
