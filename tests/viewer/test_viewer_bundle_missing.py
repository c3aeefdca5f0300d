"""Without the viewer's bundle: the notebook shows the static picture with a note, save(.html) says how to get it."""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

import pytest
from viewer_support import chain_graph, module_graph

from graphviz_app import save
from graphviz_app.drawing.notebook import SVG_MAX_NODES
from graphviz_app.errors import RenderError
from graphviz_app.viewer import bundle, viewer_html

HOW_TO_GET_IT = (r"missing from .*: this copy of graphviz-app was installed without it.*reinstall graphviz-app "
                 r"from a wheel.*`pip install \.`.*Node\.js 18.*npm ci && npm run build.*need no bundle")


@pytest.fixture
def no_bundle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The bundle folder pointed at an empty one, named with markup to show the note is escaped."""
    empty = tmp_path / "<b>dist"
    empty.mkdir()
    monkeypatch.setattr(bundle, "DIST", empty)
    return empty


@pytest.mark.usefixtures("no_bundle")
def test_saving_html_says_what_is_missing_and_how_to_get_it(tmp_path: Path) -> None:
    with pytest.raises(RenderError, match=r"viewer's browser bundle \(viewer\.(css|js)\) is " + HOW_TO_GET_IT):
        save(module_graph(2), tmp_path / "x.html")
    assert not (tmp_path / "x.html").exists()
    assert save(module_graph(2), tmp_path / "x.dot").read_text().startswith("digraph")  # what needs no bundle works


def test_the_notebook_shows_the_static_picture_under_a_note(no_bundle: Path) -> None:
    graph = module_graph(2)
    bundle_ = graph._repr_mimebundle_()
    shown = graph._repr_html_()
    assert shown == bundle_["text/html"] and "<iframe" not in shown
    note = re.search(r"<p [^>]*>(.*?)</p>", shown)
    assert note is not None
    text = html.unescape(note.group(1))
    assert re.search(HOW_TO_GET_IT, text) and "Showing the static picture instead." in text
    assert str(no_bundle) in text and "<b>" not in note.group(1)  # the folder's name is text
    picture = re.search(r'<img [^>]*src="data:image/svg\+xml;base64,([^"]+)">', shown)
    assert picture is not None
    assert base64.b64decode(picture.group(1)).decode() == bundle_["image/svg+xml"] == graph._repr_svg_()


@pytest.mark.usefixtures("no_bundle")
def test_a_graph_too_big_for_a_cell_picture_gets_the_note_alone() -> None:
    graph = chain_graph(SVG_MAX_NODES)
    assert len(graph.nodes) > SVG_MAX_NODES
    bundle_ = graph._repr_mimebundle_()
    assert set(bundle_) == {"text/plain", "text/html"} and graph._repr_svg_() is None
    shown = html.unescape(graph._repr_html_())
    assert "<img" not in shown
    assert f"no static picture in a cell above {SVG_MAX_NODES:,} nodes" in shown and 'save(graph, "graph.svg")' in shown


def test_the_viewer_comes_back_with_its_bundle(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    if not (Path(bundle.__file__).parent / "dist" / "viewer.js").is_file():
        pytest.skip("the viewer's bundle is not built here: run `make setup`")
    empty = tmp_path / "empty"
    empty.mkdir()
    with monkeypatch.context() as patch:
        patch.setattr(bundle, "DIST", empty)
        assert "<iframe" not in module_graph(2)._repr_html_()
    shown = module_graph(2)._repr_html_()
    assert '<iframe class="graphviz-app-viewer"' in shown and 'id="graphviz-app-bundle"' in shown
    assert "GraphvizAppViewer.mount" in viewer_html(module_graph(2))
