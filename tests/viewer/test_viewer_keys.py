"""The viewer's keys in Chromium: arrows along the edges, Enter opens a box, / finds, Escape clears, ? lists them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from viewer_support import chain_graph, module_graph, open_viewer

from graphviz_app import save

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _title(page: Any) -> str:
    return page.locator(".gv-details-title").inner_text()


def _selected(page: Any) -> str | None:
    found = page.locator(".gv-viewport .gv-selected")
    if found.count() == 0:
        return None
    return found.get_attribute("data-node") or found.get_attribute("data-group")


def test_arrows_walk_a_chain_from_the_output_to_the_input_and_back(page, tmp_path: Path) -> None:  # noqa: ANN001
    path = save(chain_graph(3), tmp_path / "chain.html")
    open_viewer(page, path)
    page.keyboard.press("ArrowUp")  # nothing selected: the output first
    walk = [_selected(page)]
    for _ in range(4):
        page.keyboard.press("ArrowUp")
        walk.append(_selected(page))
    assert walk == ["n0", "n1", "n2", "n3", "n4"]  # output, the three ops, the leaf x
    assert _title(page) == "x"
    page.keyboard.press("ArrowUp")
    assert _selected(page) == "n4"  # no input above the leaf: the selection stays
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    assert _selected(page) == "n2" and _title(page) == "SinBackward0"


def test_sideways_goes_to_the_other_input_and_enter_opens_and_closes_a_box(page, tmp_path: Path) -> None:  # noqa: ANN001
    path = save(module_graph(3), tmp_path / "model.html")
    open_viewer(page, path, "#open=0.1.2.12.3.4")
    page.locator("[data-node=n12]").click()  # blocks.0.fc.weight, beside the saved mat1 into AddmmBackward0
    inputs = {"blocks.0.fc.weight", "mat1", "x"}  # AddmmBackward0's: the weight, the saved mat1 and the input x
    page.keyboard.press("ArrowRight")
    right = _title(page)
    assert right in inputs - {"blocks.0.fc.weight"}
    page.keyboard.press("ArrowLeft")
    assert _title(page) in inputs - {right}
    page.locator("[data-node=n12]").click()
    page.keyboard.press("Enter")  # a node: its box (blocks.0.fc) closes
    box = page.locator("[data-module='blocks.0.fc']")
    assert "gv-closed" in box.get_attribute("class")
    assert _selected(page) == box.get_attribute("data-group")
    page.keyboard.press("Enter")  # the selected closed box opens
    assert "gv-open" in page.locator("[data-module='blocks.0.fc']").get_attribute("class")


def test_slash_finds_escape_clears_and_question_mark_lists_the_keys(page, tmp_path: Path) -> None:  # noqa: ANN001
    path = save(module_graph(3), tmp_path / "model.html")
    open_viewer(page, path)
    page.keyboard.press("?")
    assert page.get_by_test_id("viewer-help").is_visible()
    assert "open or close the selected box" in page.get_by_test_id("viewer-help").inner_text()
    page.keyboard.press("?")
    assert not page.get_by_test_id("viewer-help").is_visible()
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.dataset.testid") == "viewer-search"
    page.keyboard.type("Addmm")
    page.keyboard.press("Enter")
    assert _title(page) == "AddmmBackward0"
    assert page.locator(".gv-viewport .gv-match").count() >= 1
    page.keyboard.press("Escape")
    assert _selected(page) is None and page.locator(".gv-viewport .gv-match").count() == 0
    assert page.get_by_test_id("viewer-search").input_value() == ""
    assert not page.get_by_test_id("viewer-details").is_visible()
    page.keyboard.press("ArrowUp")  # the keys work again at once: the viewer kept the keyboard
    assert _selected(page) == "n0"
