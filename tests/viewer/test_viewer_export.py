"""Pictures out of the viewer in Chromium: SVG and PNG of the view and of the whole drawing, from the toolbar."""

from __future__ import annotations

import re
import struct
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from viewer_support import HOSTILE, drawn_nodes, module_graph, open_viewer

from graphviz_app import save

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SVG = "{http://www.w3.org/2000/svg}"


def _export(page: Any, what: str, tmp_path: Path) -> bytes:
    with page.expect_download() as info:
        page.get_by_test_id("viewer-export").select_option(what)
    path = tmp_path / info.value.suggested_filename
    info.value.save_as(path)
    return path.read_bytes()


def _on_screen(page: Any) -> list[str]:
    """The ids of the nodes drawn wholly inside the pane."""
    return page.evaluate("""() => {
      const pane = document.querySelector('[data-testid=viewer-pane]').getBoundingClientRect();
      return [...document.querySelectorAll('.gv-viewport [data-node]')].filter((e) => {
        const r = e.getBoundingClientRect();
        return r.left >= pane.left && r.right <= pane.right && r.top >= pane.top && r.bottom <= pane.bottom;
      }).map((e) => e.getAttribute('data-node'));
    }""")


def _safe(svg: bytes) -> ET.Element:
    """The picture parsed, after checking it runs nothing and fetches nothing."""
    text = svg.decode("utf-8")
    assert "<script" not in text.lower() and "javascript:" not in text.lower()
    assert "href" not in text and "<image" not in text and "<foreignObject" not in text
    assert not [u for u in re.findall(r"url\(([^)]*)\)", text) if not u.startswith("#")], "an external reference"
    return ET.fromstring(svg)


def test_the_svg_of_the_view_holds_the_nodes_on_screen_styled_and_safe(page, tmp_path: Path) -> None:  # noqa: ANN001
    path = save(module_graph(3, hostile=True), tmp_path / "hostile.html")
    open_viewer(page, path, "#open=0.1.2.3.4.5.6.7.8.9.10.11.12")
    shown = _on_screen(page)
    assert shown
    root = _safe(_export(page, "view.svg", tmp_path))
    ids = {e.get("data-node") for e in root.iter() if e.get("data-node")}
    assert set(shown) <= ids
    texts = {e.text for e in root.iter(f"{SVG}text")}
    assert any(t in texts for t in HOSTILE), "a hostile name comes through as the text it is"
    rect = next(e for e in root.iter(f"{SVG}rect") if e.get("class") == "gv-shape")
    assert rect.get("fill", "").startswith(("rgb", "#")) and rect.get("stroke")  # styles on the element itself
    assert page.evaluate("window.__pwned") is None and page.errors == []


def test_the_svg_of_the_whole_drawing_holds_every_drawn_node(page, tmp_path: Path) -> None:  # noqa: ANN001
    path = save(module_graph(6), tmp_path / "model.html")
    open_viewer(page, path, "#open=0.1.2")
    page.get_by_role("button", name="Zoom in").click()
    page.get_by_role("button", name="Zoom in").click()
    root = _safe(_export(page, "drawing.svg", tmp_path))
    ids = [e.get("data-node") for e in root.iter() if e.get("data-node")]
    assert sorted(ids) == sorted(drawn_nodes(page))
    w, h = float(root.get("width")), float(root.get("height"))
    assert w > 100 and h > 100


@pytest.mark.parametrize("what", ["view.png", "drawing.png"])
def test_a_png_comes_out_of_the_view_and_of_the_whole_drawing(page, tmp_path: Path, what: str) -> None:  # noqa: ANN001
    path = save(module_graph(3), tmp_path / "model.html")
    open_viewer(page, path)
    data = _export(page, what, tmp_path)
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    pane = page.get_by_test_id("viewer-pane").bounding_box()
    assert width >= 100 and height >= 100
    if what == "view.png":  # the pane, at twice its pixels
        assert abs(width - 2 * pane["width"]) <= 4 and abs(height - 2 * pane["height"]) <= 4
