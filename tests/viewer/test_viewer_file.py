"""The viewer as a self-contained HTML file, opened from disk in a real Chromium."""

from __future__ import annotations

from pathlib import Path

import pytest
from viewer_support import HOSTILE, chain_graph, drawn_nodes, module_graph, open_viewer

from graphviz_app import save
from graphviz_app.drawing.renderer import export

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def model_html(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save(module_graph(3), tmp_path_factory.mktemp("viewer") / "model.html")


def test_the_file_makes_no_request_but_itself_and_draws_the_graph(page, model_html: Path) -> None:  # noqa: ANN001
    viewer = open_viewer(page, model_html)
    assert viewer.get_attribute("data-state") == "ready"
    assert page.requests == [model_html.as_uri()]
    assert drawn_nodes(page), "the pane is blank"
    assert page.locator("[data-node='n0']").is_visible()  # the output end is in view
    assert page.errors == []


def test_opening_and_closing_a_module_box_changes_the_drawing(page, model_html: Path) -> None:  # noqa: ANN001
    open_viewer(page, model_html)
    page.get_by_role("button", name="Close all").click()
    closed = set(drawn_nodes(page))
    box = page.locator("[data-module='head'].gv-closed")
    box.click()
    opened = set(drawn_nodes(page))
    assert "n1" in opened - closed  # SumBackward0 of the head shows once its box is open
    page.locator("[data-module='head'].gv-open .gv-bar").click()  # its title bar closes it
    assert set(drawn_nodes(page)) == closed
    assert page.locator("[data-module='head'].gv-closed").count() == 1


def test_a_rolled_box_opens_to_one_instance_and_steps_to_the_others(page, model_html: Path) -> None:  # noqa: ANN001
    open_viewer(page, model_html)
    page.get_by_role("button", name="Close all").click()
    page.locator("[data-module='blocks'].gv-closed").click()
    roll = page.locator(".gv-roll.gv-closed")
    assert "×3" in roll.text_content()
    roll.click()
    first = page.locator("[data-module='blocks.0']")
    assert first.count() == 1 and page.locator("[data-module='blocks.1']").count() == 0
    page.locator(".gv-roll.gv-open .gv-next-instance").click()
    assert page.locator("[data-module='blocks.1']").count() == 1
    assert page.locator("[data-module='blocks.0']").count() == 0


def test_search_finds_a_node_inside_a_closed_box_and_opens_its_path(page, model_html: Path) -> None:  # noqa: ANN001
    open_viewer(page, model_html)
    page.get_by_role("button", name="Close all").click()
    assert page.locator("[data-node='n2']").count() == 0  # blocks.2.act's op: inside closed boxes
    search = page.get_by_test_id("viewer-search")
    search.fill("blocks.2.act")
    search.press("Enter")
    node = page.locator("[data-node='n2']")
    node.wait_for()
    assert "gv-selected" in (node.get_attribute("class") or "")
    assert page.get_by_test_id("viewer-count").inner_text().startswith("1 of")
    details = page.get_by_test_id("viewer-details").inner_text()
    assert "blocks.2.act" in details and "ReLU" in details


def test_details_show_shape_dtype_module_and_source_line(page, model_html: Path) -> None:  # noqa: ANN001
    open_viewer(page, model_html, "#open=0&sel=n1")
    details = page.get_by_test_id("viewer-details")
    details.wait_for()
    text = details.inner_text()
    for expected in ("SumBackward0", "shape", "()", "dtype", "float32", "module", "head (Head)", "source",
                     "model.py:30 in forward", "gradient norm", "0.5"):
        assert expected in text, expected


def test_the_fragment_reproduces_a_view(page, browser, model_html: Path) -> None:  # noqa: ANN001
    open_viewer(page, model_html)
    page.get_by_role("button", name="Close all").click()
    page.locator("[data-module='head'].gv-closed").click()
    page.locator("[data-node='n1']").click()
    page.get_by_test_id("viewer-color").select_option("gradient")
    view = page.get_by_test_id("graph-viewer").get_attribute("data-view")
    assert page.evaluate("location.hash") == view
    shown = sorted(drawn_nodes(page))
    other = browser.new_page()
    try:
        open_viewer(other, model_html, view)
        assert sorted(drawn_nodes(other)) == shown
        assert "gv-selected" in (other.locator("[data-node='n1']").get_attribute("class") or "")
        assert other.get_by_test_id("viewer-color").input_value() == "gradient"
    finally:
        other.close()


def test_hostile_names_show_as_text_and_run_nothing(page, tmp_path: Path) -> None:  # noqa: ANN001
    path = save(module_graph(4, hostile=True), tmp_path / "hostile.html")
    text = path.read_text(encoding="utf-8")
    assert "onerror" not in text and "</script><script>" not in text  # the data is base64, not markup
    open_viewer(page, path, "#open=0&sel=n2")
    page.get_by_test_id("viewer-search").fill("blocks")
    page.get_by_test_id("viewer-search").press("Enter")
    for _ in range(4):
        page.get_by_test_id("viewer-search").press("Enter")
    assert page.evaluate("window.__pwned") is None
    assert page.dialogs == [] and page.errors == []
    assert page.locator("img, iframe, [onerror], [onload]").count() == 0
    body = page.locator("body").inner_text()
    assert any(name[:20] in body for name in HOSTILE)  # shown, as text


def test_a_long_flat_chain_opens_as_a_few_boxes_and_its_fold_opens_to_one_repetition(page, tmp_path: Path) -> None:  # noqa: ANN001
    path = tmp_path / "chain.html"
    path.write_bytes(export(chain_graph(4000), "html"))
    open_viewer(page, path)
    assert len(drawn_nodes(page)) < 10
    fold = page.locator(".gv-fold.gv-closed")
    assert "SinBackward0 → MulBackward0 ×2,000" in fold.text_content()
    fold.click()
    ops = [n for n in drawn_nodes(page) if n not in ("n0",)]
    assert 2 <= len(ops) <= 4
    assert "1 of 2,000" in page.locator(".gv-fold.gv-open").text_content()


def test_a_damaged_file_says_so(page, tmp_path: Path) -> None:  # noqa: ANN001
    text = export(module_graph(1), "html").decode()
    start = text.index('id="gv-payload">') + len('id="gv-payload">')
    path = tmp_path / "damaged.html"
    path.write_text(text[:start] + "not-base64!!" + text[text.index("</script>", start):], encoding="utf-8")
    page.goto(path.as_uri())
    error = page.get_by_test_id("viewer-error")
    error.wait_for()
    assert "damaged" in error.inner_text()
