"""The module table in Chromium: rows per module, sortable, a click selects the module's box."""

from __future__ import annotations

from pathlib import Path

import pytest
from real_models import gpt2
from viewer_support import module_graph, open_viewer, with_order

from graphviz_app.viewer import viewer_html

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_the_table_lists_modules_sorts_and_a_click_selects_the_box(page, tmp_path: Path) -> None:  # noqa: ANN001
    path = tmp_path / "m.html"
    text = viewer_html(with_order(module_graph(3)), overlays={"latency_ms": {"blocks": 9.5}})
    path.write_text(text, encoding="utf-8")
    open_viewer(page, path)
    assert not page.get_by_test_id("viewer-table-panel").is_visible()
    page.get_by_test_id("viewer-table-button").click()
    table = page.get_by_test_id("viewer-table")
    headers = table.locator("thead th").all_inner_texts()
    assert headers[:4] == ["module", "type", "parameters", "ops"] and "latency_ms" in headers
    rows = table.locator("tbody tr")
    assert rows.locator("td:first-child").all_inner_texts() == ["head", "blocks", "blocks.0–2: Block ×3"]
    assert "9.5" in rows.nth(1).inner_text()
    table.locator("th[data-column=ops]").click()  # most ops first, children under their parent
    assert page.errors == []
    assert rows.locator("td:first-child").all_inner_texts() == ["blocks", "blocks.0–2: Block ×3", "head"]
    rows.nth(1).click()
    selected = page.locator(".gv-viewport .gv-selected")
    assert selected.count() == 1 and selected.get_attribute("data-roll") == "blocks.0"
    assert page.locator(".gv-details-title").inner_text() == "blocks.0–2: Block ×3"
    assert "gv-row-selected" in rows.nth(1).get_attribute("class")
    assert page.errors == []


def test_gpt2s_head_names_the_embedding_it_is_tied_to(page, tmp_path: Path) -> None:  # noqa: ANN001
    path = tmp_path / "gpt2.html"
    path.write_text(viewer_html(gpt2(layers=2)), encoding="utf-8")
    open_viewer(page, path)
    page.get_by_test_id("viewer-table-button").click()
    table = page.get_by_test_id("viewer-table")
    tied = table.locator("thead th").all_inner_texts().index("tied parameters")
    cells = {r[0]: r[tied] for r in (row.locator("td").all_inner_texts() for row in table.locator("tbody tr").all())}
    assert cells["lm_head"] == "transformer.wte.weight"
    assert [name for name, t in cells.items() if t] == ["lm_head"]  # no other module borrows a parameter
