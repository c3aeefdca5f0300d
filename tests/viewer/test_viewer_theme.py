"""Dark and light in Chromium: the system's choice and the toggle; contrast measured from the rendered colours."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from viewer_support import module_graph, open_viewer, with_order

from graphviz_app import save

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# For every drawn label: its colour and the fill behind it (the node's or closed box's shape, an open
# box's title bar), as drawn; and each edge's colour against the pane's background. WCAG 2 contrast.
_CONTRASTS = """() => {
  const rgb = (c) => c.match(/[\\d.]+/g).slice(0, 3).map(Number);
  const lum = (c) => {
    const v = rgb(c).map((x) => { x /= 255; return x <= 0.03928 ? x / 12.92 : ((x + 0.055) / 1.055) ** 2.4; });
    return 0.2126 * v[0] + 0.7152 * v[1] + 0.0722 * v[2];
  };
  const ratio = (a, b) => {
    const [hi, lo] = [lum(a), lum(b)].sort((x, y) => y - x);
    return (hi + 0.05) / (lo + 0.05);
  };
  const fill = (e) => getComputedStyle(e).fill;
  const texts = [];
  for (const item of document.querySelectorAll('.gv-viewport [data-node], .gv-viewport .gv-closed')) {
    const shape = item.querySelector(':scope > .gv-shape:not(.gv-behind)');
    for (const t of item.querySelectorAll(':scope > text')) texts.push([t.textContent, ratio(fill(t), fill(shape))]);
  }
  for (const bar of document.querySelectorAll('.gv-viewport .gv-open > .gv-bar')) {
    for (const t of bar.parentNode.querySelectorAll(':scope > text')) {
      texts.push([t.textContent, ratio(fill(t), fill(bar))]);
    }
  }
  const pane = getComputedStyle(document.querySelector('[data-testid=viewer-pane]')).backgroundColor;
  const edges = [...document.querySelectorAll('.gv-viewport .gv-edge')]
    .map((e) => ratio(getComputedStyle(e).stroke, pane));
  return {texts, edges, pane: lum(pane)};
}"""


def _colourings(page: Any) -> list[str]:
    return page.eval_on_selector_all("[data-testid=viewer-color] option", "os => os.map(o => o.value)")


def _check(page: Any, theme: str) -> None:
    for key in _colourings(page):
        page.get_by_test_id("viewer-color").select_option(key)
        seen = page.evaluate(_CONTRASTS)
        assert len(seen["texts"]) > 20 and seen["edges"]
        low = [(t, round(r, 2)) for t, r in seen["texts"] if r < 4.5]
        assert not low, f"{theme}, colour by {key}: text below 4.5:1: {low[:5]}"
        assert min(seen["edges"]) >= 3, f"{theme}, colour by {key}: an edge below 3:1 against the pane"


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_every_colouring_keeps_text_at_4_5_to_1_and_edges_visible(page, tmp_path: Path, scheme: str) -> None:  # noqa: ANN001
    page.emulate_media(color_scheme=scheme)
    path = save(with_order(module_graph(3)), tmp_path / "model.html")
    open_viewer(page, path, "#open=0.1.2.12.3.4.5")
    assert (page.evaluate(_CONTRASTS)["pane"] < 0.1) == (scheme == "dark")  # it follows the system
    _check(page, scheme)


def test_the_toggle_switches_the_theme_and_contrast_holds_after_it(page, tmp_path: Path) -> None:  # noqa: ANN001
    page.emulate_media(color_scheme="dark")
    path = save(with_order(module_graph(3)), tmp_path / "model.html")
    viewer = open_viewer(page, path, "#open=0.1.2.12.3.4.5")
    page.get_by_test_id("viewer-theme").click()
    assert viewer.get_attribute("data-theme") == "light"
    assert page.evaluate(_CONTRASTS)["pane"] > 0.8
    _check(page, "light by the toggle")
    page.get_by_test_id("viewer-theme").click()
    assert viewer.get_attribute("data-theme") == "dark"
    assert page.evaluate(_CONTRASTS)["pane"] < 0.1
