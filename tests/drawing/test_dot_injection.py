"""Module names that try to inject Graphviz code stay text in every picture: SVG, PNG, PDF, DOT, the CLI,
`diff -o`, the page's downloads and the notebook's SVG."""

from __future__ import annotations

import json
import re
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch
from PIL import Image
from torch import nn

from graphviz_app import Graph, save, trace_model
from graphviz_app.cli.commands import main
from graphviz_app.drawing.dot_text import FORBIDDEN_ATTRS, dot_string, escape_text
from graphviz_app.drawing.renderer import export
from graphviz_app.jobs.pictures import png_job, svg_job

SVG_NS = "{http://www.w3.org/2000/svg}"
SECRET_RGB = (255, 0, 255)  # a colour no drawing of ours uses: the "server file" an injected image= would draw


def _names(secret: Path) -> list[str]:
    """Module names an attacker (or a config-named adapter) could register with add_module."""
    return [
        "adapter\\",  # one final backslash: closed graphviz.quote()'s string
        "three\\\\\\",
        f'js\\" URL=<javascript:alert(1)> image=<{secret}> tooltip=\\',
        f'q" URL="javascript:alert(2)" image="{secret}" x="',
        f'img\\"] n9 [image="{secret}" label="" shape=none] x [label="\\',
        "<b>bold</b>",
        "<<TABLE><TR><TD>html</TD></TR></TABLE>>",
        "nul\x00byte",
        "lone\ud800surrogate",
        "esc\\N\\G\\l&lt;&#0;",
    ]


def _shown(name: str) -> str:
    """How a name reads in a picture: control characters as their Unicode pictures, lone surrogates as U+FFFD."""
    return re.sub("[\ud800-\udfff]", "\ufffd", name.replace("\x00", "\u2400"))


@pytest.fixture(scope="module")
def secret(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("server") / "secret"  # no "." : module names cannot hold one
    Image.new("RGB", (120, 120), SECRET_RGB).save(path, format="PNG")
    assert "." not in str(path)
    return path


@pytest.fixture(scope="module")
def hostile(secret: Path) -> Graph:
    """A live model whose submodules are registered under the hostile names, traced with its modules."""
    torch.manual_seed(0)
    model = nn.Sequential()
    for name in _names(secret):
        model.add_module(name, nn.Linear(2, 2))
    return trace_model(model, torch.randn(1, 2))


def _assert_svg_is_text_only(svg: str, names: list[str]) -> None:
    root = ET.fromstring(svg)  # well-formed XML
    assert not [el.tag for el in root.iter() if el.tag.split("}")[-1] in ("a", "image", "script", "foreignObject")]
    for el in root.iter():
        for key, value in el.attrib.items():
            assert not key.endswith("href"), f"link attribute {key}={value!r}"
            assert "javascript:" not in value, f"{key}={value!r}"
    texts = "\n".join(t.text or "" for t in root.iter(f"{SVG_NS}text"))
    for name in names:
        assert _shown(name) in texts, f"{name!r} is not drawn as text"


def _assert_no_secret_pixels(png: bytes, tmp_path: Path) -> None:
    path = tmp_path / "out.png"
    path.write_bytes(png)
    with Image.open(path) as im:
        colours = {c for _, c in im.convert("RGB").getcolors(maxcolors=1 << 20) or []}
    assert SECRET_RGB not in colours, "the picture drew a file from disk"


def _graphviz_objects(dot: str) -> list[dict[str, object]]:
    """Every graph, cluster, node and edge as Graphviz itself parses the DOT text (dot -Tjson0)."""
    run = subprocess.run(["dot", "-Tjson0"], input=dot, capture_output=True, text=True, timeout=120, check=True)
    data = json.loads(run.stdout)
    return [data, *data.get("objects", []), *data.get("edges", [])]


def _assert_dot_sets_no_forbidden_attrs(dot: str, names: list[str]) -> None:
    objects = _graphviz_objects(dot)
    for obj in objects:
        bad = sorted(k for k in obj if k.lower() in FORBIDDEN_ATTRS)
        assert not bad, f"{obj.get('name')!r} sets {bad}"
    clusters = [str(o["name"]) for o in objects if str(o.get("name", "")).startswith("cluster_")]
    for name in names:  # each module is one cluster, its name kept whole (as DOT's lexer reads a \\" : ")
        assert f"cluster_{escape_text(name)}".replace('\\"', '"') in clusters


@pytest.mark.parametrize("fmt", ["svg", "png", "pdf", "dot"])
def test_hostile_module_names_through_save_stay_text(hostile: Graph, secret: Path, tmp_path: Path, fmt: str) -> None:
    names = _names(secret)
    data = save(hostile, tmp_path / f"g.{fmt}", engine="dot").read_bytes()
    if fmt == "svg":
        _assert_svg_is_text_only(data.decode(), names)
    elif fmt == "png":
        assert data.startswith(b"\x89PNG")
        _assert_no_secret_pixels(data, tmp_path)
    elif fmt == "pdf":
        assert data.startswith(b"%PDF-")
        assert b"/URI" not in data and b"/Subtype /Image" not in data and b"javascript" not in data
    else:
        _assert_dot_sets_no_forbidden_attrs(data.decode(), names)
        for name in names:
            assert dot_string(f"{name}: Linear") in data.decode()


def test_hostile_module_names_through_graphviz_pure_stay_text(hostile: Graph, secret: Path, tmp_path: Path) -> None:
    data = save(hostile, tmp_path / "g.svg", engine="graphviz-pure").read_bytes()
    _assert_svg_is_text_only(data.decode(), _names(secret))


def test_hostile_names_survive_the_json_round_trip(hostile: Graph) -> None:
    assert Graph.from_json(hostile.to_json()) == hostile


def test_cli_render_of_a_hostile_saved_graph_stays_text(hostile: Graph, secret: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    saved = save(hostile, tmp_path / "g.json")
    for fmt in ("svg", "png", "dot"):
        assert main(["render", str(saved), "-o", str(tmp_path / f"cli.{fmt}")]) == 0, capsys.readouterr().err
    _assert_svg_is_text_only((tmp_path / "cli.svg").read_text(), _names(secret))
    _assert_no_secret_pixels((tmp_path / "cli.png").read_bytes(), tmp_path)
    _assert_dot_sets_no_forbidden_attrs((tmp_path / "cli.dot").read_text(), _names(secret))


def test_cli_diff_output_of_hostile_graphs_stays_text(hostile: Graph, secret: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    other = nn.Sequential()
    for name in _names(secret)[:4]:
        other.add_module(name, nn.Linear(2, 2))
    a = save(hostile, tmp_path / "a.json")
    b = save(trace_model(other, torch.randn(1, 2)), tmp_path / "b.json")
    code = main(["diff", str(a), str(b), "-o", str(tmp_path / "d.svg")])
    assert code in (0, 1), capsys.readouterr().err  # 1: the graphs differ
    _assert_svg_is_text_only((tmp_path / "d.svg").read_text(), _names(secret))


def test_page_downloads_of_a_hostile_graph_stay_text(hostile: Graph, secret: Path, tmp_path: Path) -> None:
    svg = svg_job(hostile.to_json(), "TB")
    png = png_job(hostile.to_json(), "TB")
    assert isinstance(svg, bytes) and isinstance(png, bytes), (svg, png)
    _assert_svg_is_text_only(svg.decode(), _names(secret))
    _assert_no_secret_pixels(png, tmp_path)


def test_notebook_svg_of_a_hostile_graph_stays_text(hostile: Graph, secret: Path) -> None:
    svg = hostile._repr_mimebundle_()["image/svg+xml"]
    _assert_svg_is_text_only(svg, _names(secret))


def test_model_explorer_json_of_hostile_names_is_strict_json_with_the_names(hostile: Graph, secret: Path) -> None:
    text = export(hostile, "model-explorer").decode()
    data = json.loads(text, parse_constant=lambda c: pytest.fail(f"not JSON: {c}"))
    assert text.isascii()  # lone surrogates and NUL written as \\u escapes, never raw
    flat = json.dumps(data)
    for name in _names(secret):
        assert json.dumps(name)[1:-1] in flat


@pytest.mark.parametrize("name", ["trailing\\", "odd\\\\\\", "<b>x</b>", 'q"', "a\nb", "nul\x00", "s\udc00"])
def test_a_name_that_could_not_be_drawn_now_lays_out(name: str) -> None:
    model = nn.Sequential()
    model.add_module(name, nn.Linear(2, 1))
    svg = export(trace_model(model, torch.randn(1, 2)), "svg", engine="dot").decode()
    texts = [t.text or "" for t in ET.fromstring(svg).iter(f"{SVG_NS}text")]
    assert any(_shown(name).split("\n")[-1] in t for t in texts)


def test_layout_note_with_a_hostile_module_name_stays_text(monkeypatch: pytest.MonkeyPatch) -> None:
    model = nn.Sequential()
    for i in range(3):
        model.add_module(f'm{i}\\" URL=<javascript:alert({i})>\\', nn.Sequential(*[nn.Linear(2, 2) for _ in range(4)]))
    graph = trace_model(model, torch.randn(1, 2))
    # The cost model predicts the full view far past the deadline, so modules are folded and named in a note.
    monkeypatch.setattr("graphviz_app.drawing.cost.ENGINE_FIT", {"dot": (1.0, 1.0), "graphviz-pure": (1.0, 1.0)})
    monkeypatch.setattr("graphviz_app.drawing.fallback.load_factor", lambda: 1.0)
    with pytest.warns(UserWarning, match="folded|drew only"):
        svg = export(graph, "svg", engine="dot", timeout=20.0).decode()
    _assert_svg_is_text_only(svg, [])
    note = " ".join(t.text or "" for t in ET.fromstring(svg).iter(f"{SVG_NS}text"))
    assert re.search(r"folded \d+ module|drew only", note)
    assert 'URL=<javascript:alert(' in note  # a module name, in the picture as text (a note or a box)
