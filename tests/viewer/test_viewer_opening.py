"""The opening view in Chromium: the model's modules, fitted and legible; the output end one click away."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest
from real_models import REAL_MODELS
from viewer_support import chain_graph, open_viewer

from graphviz_app.model import Graph
from graphviz_app.viewer import viewer_html

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# What is on screen: the module boxes inside the pane, whether the drawing lies inside it, the smallest
# label in screen pixels (font size times the scale the drawing is shown at).
_ON_SCREEN = """() => {
  const pane = document.querySelector('[data-testid=viewer-pane]').getBoundingClientRect();
  const inside = (r) => r.left >= pane.left - 1 && r.top >= pane.top - 1 &&
    r.right <= pane.right + 1 && r.bottom <= pane.bottom + 1;
  const boxes = [...document.querySelectorAll('.gv-viewport [data-module], .gv-viewport [data-roll]')];
  const labels = [...document.querySelectorAll('.gv-viewport text')].filter((t) => t.textContent.trim());
  const px = labels.map((t) => parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a);
  return {modules: boxes.filter((b) => inside(b.getBoundingClientRect())).length,
          all_inside: inside(document.querySelector('.gv-viewport').getBoundingClientRect()),
          smallest: Math.min(...px), labels: labels.length};
}"""


@functools.cache
def _graph(name: str) -> Graph:
    return REAL_MODELS[name]()


def _open(page: Any, tmp_path: Path, graph: Graph, width: int) -> dict[str, Any]:
    page.set_viewport_size({"width": width, "height": 900})
    path = tmp_path / "g.html"
    path.write_text(viewer_html(graph), encoding="utf-8")
    viewer = open_viewer(page, path)
    assert viewer.get_attribute("data-state") == "ready"
    return page.evaluate(_ON_SCREEN)


@pytest.mark.parametrize("width", [1300, 1000])
@pytest.mark.parametrize("name", sorted(REAL_MODELS))
def test_the_opening_view_shows_the_modules_fitted_with_legible_labels(page, tmp_path: Path, name: str,
                                                                        width: int) -> None:  # noqa: ANN001
    seen = _open(page, tmp_path, _graph(name), width)
    assert seen["modules"] >= 3, seen
    assert seen["all_inside"], seen
    assert seen["smallest"] >= 10, seen
    assert page.get_by_test_id("viewer-scale").inner_text() != "100%" or seen["all_inside"]


def test_output_goes_to_the_output_end_at_a_legible_scale(page, tmp_path: Path) -> None:  # noqa: ANN001
    _open(page, tmp_path, _graph("gpt2"), 1300)
    page.get_by_test_id("viewer-output").click()
    output = page.locator("[data-node=n0]")
    pane = page.get_by_test_id("viewer-pane").bounding_box()
    box = output.bounding_box()
    assert box is not None and pane is not None
    assert pane["x"] <= box["x"] and box["x"] + box["width"] <= pane["x"] + pane["width"]
    assert pane["y"] <= box["y"] and box["y"] + box["height"] <= pane["y"] + pane["height"]
    assert page.evaluate(_ON_SCREEN)["smallest"] >= 10


def test_a_graph_without_modules_opens_on_its_folded_run_fitted(page, tmp_path: Path) -> None:  # noqa: ANN001
    seen = _open(page, tmp_path, chain_graph(2_000), 1300)
    assert seen["all_inside"] and seen["smallest"] >= 10, seen
    assert page.locator(".gv-fold.gv-closed").count() == 1
