"""Layout off the main thread in Chromium: a big box is drawn at once as a placeholder and laid out in a Web Worker."""

from __future__ import annotations

from pathlib import Path

import pytest
from viewer_support import open_viewer, wide_graph

from graphviz_app.model import Graph
from graphviz_app.viewer import viewer_html

pytestmark = [pytest.mark.browser, pytest.mark.slow]

WIDE = 120  # ops in one module box: more than BIG (layout.js), fewer than a box holds before it is cut in parts


def _wide_graph() -> Graph:
    return wide_graph(WIDE)


def test_a_big_box_is_laid_out_in_the_worker_after_a_placeholder(page, tmp_path: Path) -> None:  # noqa: ANN001
    path = tmp_path / "wide.html"
    path.write_text(viewer_html(_wide_graph()), encoding="utf-8")
    viewer = open_viewer(page, path)
    assert viewer.get_attribute("data-worker-layouts") == "0"
    page.locator("[data-module='wide'].gv-closed").click()
    page.wait_for_selector("[data-testid=graph-viewer][data-waiting='0'][data-worker-layouts='1']")
    assert int(viewer.get_attribute("data-placeholders")) >= 1  # drawn at once, before its layout came back
    box = page.locator("[data-module='wide'].gv-open")
    assert "laying out" not in box.locator(".gv-frame-title").text_content()
    ys = page.eval_on_selector_all(".gv-viewport [data-node]",
                                   "els => els.filter(e => /^MulBackward/.test(e.textContent))"
                                   ".map(e => e.transform.baseVal.consolidate().matrix.f)")
    assert len(ys) == WIDE
    assert len(set(round(y) for y in ys)) == 1  # Graphviz's layout (one rank), not the placeholder's rows
    assert [r for r in page.requests if not r.startswith("blob:")] == [path.as_uri()]  # the worker: from a blob
    assert page.errors == []


def test_closing_and_opening_the_big_box_again_uses_the_kept_layout(page, tmp_path: Path) -> None:  # noqa: ANN001
    path = tmp_path / "wide.html"
    path.write_text(viewer_html(_wide_graph()), encoding="utf-8")
    viewer = open_viewer(page, path)
    page.locator("[data-module='wide'].gv-closed").click()
    page.wait_for_selector("[data-testid=graph-viewer][data-waiting='0'][data-worker-layouts='1']")
    placeholders = viewer.get_attribute("data-placeholders")
    page.locator("[data-module='wide'].gv-open .gv-bar").click()
    page.locator("[data-module='wide'].gv-closed").click()
    assert viewer.get_attribute("data-waiting") == "0" and viewer.get_attribute("data-placeholders") == placeholders
    assert viewer.get_attribute("data-worker-layouts") == "1"
