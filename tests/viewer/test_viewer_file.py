"""The viewer as a self-contained HTML file, opened from disk in a real Chromium."""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path
from urllib.parse import quote

import pytest
from viewer_support import HOSTILE, chain_graph, drawn_nodes, module_graph, open_viewer

from graphviz_app import save
from graphviz_app.drawing.renderer import export
from graphviz_app.model import GradInfo, Graph

pytestmark = pytest.mark.browser

# The viewer's fills (graphviz_app/viewer/src/colour.js): by kind, and an overlay's ends, none and flagged.
KIND_FILL = {"output": "#d9f2d9", "op": "#eef1f6", "leaf": "#dbe9ff", "saved": "#ffe9c7"}
RAMP_LOW, RAMP_HIGH, NO_VALUE, FLAG = "#2c7bb6", "#d7191c", "#f2f2f2", "#ff4d4d"


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
    for _ in range(4):  # close in on a corner: the match must be brought into view
        page.get_by_role("button", name="Zoom in").click()
    search = page.get_by_test_id("viewer-search")
    search.fill("blocks.2.act")
    search.press("Enter")
    node = page.locator("[data-node='n2']")
    node.wait_for()
    assert "gv-selected" in (node.get_attribute("class") or "")
    assert page.get_by_test_id("viewer-count").inner_text().startswith("1 of")
    pane, found = page.get_by_test_id("viewer-pane").bounding_box(), node.bounding_box()
    assert pane["x"] <= found["x"] and found["x"] + found["width"] <= pane["x"] + pane["width"]  # moved into view
    assert pane["y"] <= found["y"] and found["y"] + found["height"] <= pane["y"] + pane["height"]
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


def test_a_fragment_can_name_module_boxes_to_open(page, model_html: Path) -> None:  # noqa: ANN001
    """`#expand=` (what the web page's `?expand=` links become): boxes by name, with the boxes around them."""
    open_viewer(page, model_html, "#open=0&expand=blocks.2.act,no.such.module")
    assert page.locator("[data-module='blocks.2.act'].gv-open").count() == 1
    assert page.locator("[data-node='n2']").is_visible()  # its op, inside blocks > blocks.0–2 > blocks.2
    assert page.locator("[data-module='head'].gv-closed").count() == 1  # the rest stays as it was
    assert page.errors == []


def test_the_op_where_nan_first_appears_is_marked(page, tmp_path: Path) -> None:  # noqa: ANN001
    from dataclasses import replace

    path = save(replace(module_graph(1), nonfinite_origin="n1"), tmp_path / "nan.html")
    open_viewer(page, path, "#open=0.1&sel=n1")
    node = page.locator("[data-node='n1']")
    assert "gv-origin" in (node.get_attribute("class") or "")
    assert "NaN/Inf origin" in node.text_content()
    assert "NaN/Inf origin" in page.get_by_test_id("viewer-details").inner_text()


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


def _packed(text: bytes) -> str:
    return base64.b64encode(gzip.compress(text)).decode()


@pytest.mark.parametrize(("data", "words"), [
    ("not-base64!!", "the graph data is damaged (not base64): save the graph again"),
    (base64.b64encode(b"plain text").decode(), "the graph data is damaged (not gzip): save the graph again"),
    (_packed(b"{not json"), "the graph data is damaged (not JSON): save the graph again"),
    (_packed(b"[" * 100_000 + b"]" * 100_000), "this is not graphviz-app viewer data"),
    (_packed(json.dumps({"format": "graphviz-app-viewer", "version": 99}).encode()),
     "the graph data is of viewer version 99; this viewer reads versions 1 and 2: save the graph again with this "
     "graphviz-app"),
    (_packed(json.dumps({"format": "graphviz-app-viewer", "version": 1, "graph": {}}).encode()),
     "the graph data lacks its nodes, edges or boxes"),
], ids=["base64", "gzip", "json", "nested", "version", "columns"])
def test_a_damaged_file_says_so(page, tmp_path: Path, data: str, words: str) -> None:  # noqa: ANN001
    text = export(module_graph(1), "html").decode()
    start = text.index('id="gv-payload">') + len('id="gv-payload">')
    path = tmp_path / "damaged.html"
    path.write_text(text[:start] + data + text[text.index("</script>", start):], encoding="utf-8")
    page.goto(path.as_uri())
    error = page.get_by_test_id("viewer-error")
    error.wait_for()
    assert error.inner_text() == "Could not show the graph: " + words
    assert page.errors == []


def _fills(page) -> dict[str, str]:  # noqa: ANN001
    """Each drawn node's fill as drawn (the style sheet's, or the colouring's), by node id, as #rrggbb."""
    return page.eval_on_selector_all(
        "[data-node]", "els => Object.fromEntries(els.map(e => [e.dataset.node, "
        "'#' + getComputedStyle(e.querySelector('.gv-shape')).fill.match(/\\d+/g).slice(0, 3)"
        ".map(v => (+v).toString(16).padStart(2, '0')).join('')]))")


def _coloured_graph() -> Graph:
    """One block whose ops have different gradient norms, and one with NaN in its gradient (n3)."""
    from dataclasses import replace

    graph = module_graph(1)
    grads = {"n1": GradInfo(numel=8, norm=10.0, max_abs=5.0, mean_abs=1.0),
             "n2": GradInfo(numel=8, norm=0.01, max_abs=0.01, mean_abs=0.001),
             "n3": GradInfo(numel=8, norm=1.0, max_abs=1.0, mean_abs=0.5, nan=2)}  # norm over the finite ones
    nodes = tuple(replace(n, grad=grads[n.id]) if n.id in grads else n for n in graph.nodes)
    return replace(graph, nodes=nodes)


def test_colour_by_gradient_and_by_memory_and_back(page, tmp_path: Path) -> None:  # noqa: ANN001
    path = save(_coloured_graph(), tmp_path / "colour.html")
    open_viewer(page, path, "#open=0.1.2.3.4.5")  # every box open: ids n0-n6 drawn
    by_kind = _fills(page)
    assert by_kind["n1"] == KIND_FILL["op"] and by_kind["n5"] == KIND_FILL["saved"]
    colour = page.get_by_test_id("viewer-color")
    assert [o.get_attribute("value") for o in colour.locator("option").all()] == ["kind", "gradient", "memory"]

    colour.select_option("gradient")
    fills = _fills(page)
    assert (fills["n1"], fills["n2"], fills["n3"]) == (RAMP_HIGH, RAMP_LOW, FLAG)  # largest, smallest, NaN
    assert fills["n0"] == NO_VALUE  # no gradient recorded for the output
    assert "gradient norm: 0.01 … 10" in page.get_by_test_id("viewer-legend").inner_text()
    assert page.locator(".gv-edge-data[stroke]").count() == 0  # edges carry no gradient here: left plain
    assert "color=gradient" in page.evaluate("location.hash")

    colour.select_option("memory")
    fills = _fills(page)
    assert fills["n3"] != NO_VALUE and fills["n5"] != NO_VALUE  # the op keeping mat1, and mat1 itself
    assert fills["n1"] == NO_VALUE and fills["n2"] == NO_VALUE  # they keep nothing for backward
    assert "bytes saved for backward: 32 B … 32 B" in page.get_by_test_id("viewer-legend").inner_text()

    colour.select_option("kind")
    assert _fills(page) == by_kind
    assert page.get_by_test_id("viewer-legend").inner_text() == ""


def _transform(page) -> str:  # noqa: ANN001
    return page.locator(".gv-viewport").get_attribute("transform")


def test_zoom_fit_pan_and_the_overview_move_the_view(page, model_html: Path) -> None:  # noqa: ANN001
    open_viewer(page, model_html)
    scale = page.get_by_test_id("viewer-scale")
    page.get_by_role("button", name="Fit").click()
    fitted, fitted_scale = _transform(page), scale.inner_text()
    page.get_by_role("button", name="Zoom in").click()
    assert int(scale.inner_text().rstrip("%")) > int(fitted_scale.rstrip("%"))
    page.get_by_role("button", name="Zoom out").click()
    page.get_by_role("button", name="Zoom out").click()
    assert int(scale.inner_text().rstrip("%")) < int(fitted_scale.rstrip("%"))
    page.get_by_role("button", name="Fit").click()
    assert _transform(page) == fitted
    pane = page.get_by_test_id("viewer-pane").bounding_box()
    page.mouse.move(pane["x"] + 40, pane["y"] + 40)  # an empty corner: a drag there pans
    page.mouse.down()
    page.mouse.move(pane["x"] + 140, pane["y"] + 90, steps=5)
    page.mouse.up()
    assert _transform(page) != fitted
    overview = page.get_by_test_id("viewer-overview")
    assert overview.is_visible()
    before = _transform(page)
    box = overview.bounding_box()
    page.mouse.click(box["x"] + box["width"] * 0.8, box["y"] + box["height"] * 0.8)
    assert _transform(page) != before  # a click in the overview moves the view there


def test_opening_a_box_lays_out_only_what_changed(page, model_html: Path) -> None:  # noqa: ANN001
    viewer = open_viewer(page, model_html)
    page.get_by_role("button", name="Close all").click()
    page.locator("[data-module='head'].gv-closed").click()
    runs = int(viewer.get_attribute("data-layouts"))
    page.locator("[data-module='blocks'].gv-closed").click()
    assert int(viewer.get_attribute("data-layouts")) - runs <= 2  # the graph around it and blocks; not head
    runs = int(viewer.get_attribute("data-layouts"))
    page.locator("[data-module='head'].gv-open .gv-bar").click()
    page.locator("[data-module='head'].gv-closed").click()
    # closed and opened again: the graph's layouts with head closed and open are both kept, and head's own
    assert int(viewer.get_attribute("data-layouts")) - runs == 0


def test_details_show_bytes_device_values_attributes_and_saved_tensors(page, tmp_path: Path) -> None:  # noqa: ANN001
    from dataclasses import replace

    graph = module_graph(1)
    fc = graph.nodes[3]
    assert fc.name == "AddmmBackward0"
    fc = replace(fc, attrs=(("alpha", "1"), ("beta", "0.5")),
                 tensor=replace(fc.tensor, values=(0.25, -1.5), device="cuda:0"))
    path = save(replace(graph, nodes=graph.nodes[:3] + (fc,) + graph.nodes[4:]), tmp_path / "details.html")
    open_viewer(page, path, "#open=0.1.2.3.4.5&sel=n3")
    text = page.get_by_test_id("viewer-details").inner_text()
    for expected in ("backward op", "device", "cuda:0", "8 elements, 32 B", "values", "0.25, -1.5",
                     "attribute alpha", "attribute beta", "0.5", "saved", "mat1: (2, 4) float32 32 B",
                     "blocks.0.fc (Linear)", "model.py:11 in forward", "gradient norm"):
        assert expected in text, expected


def test_search_steps_to_the_next_and_previous_match(page, model_html: Path) -> None:  # noqa: ANN001
    open_viewer(page, model_html)
    page.get_by_role("button", name="Close all").click()
    search, count = page.get_by_test_id("viewer-search"), page.get_by_test_id("viewer-count")
    search.fill("AddmmBackward0")  # one per block, all inside closed boxes
    search.press("Enter")
    assert count.inner_text() == "1 of 3"
    selected = []
    for key in ("Enter", "Enter", "Shift+Enter"):
        selected.append(page.locator(".gv-selected").get_attribute("data-node"))
        search.press(key)
    assert count.inner_text() == "2 of 3"
    assert len(set(selected)) == 3  # three different ops were selected in turn
    page.get_by_role("button", name="Previous match").click()
    page.get_by_role("button", name="Previous match").click()
    assert count.inner_text() == "3 of 3"  # previous from the first wraps to the last
    assert page.locator(".gv-selected").get_attribute("data-node") == selected[2]


def test_the_fragment_keeps_the_instance_a_rolled_box_shows(page, browser, model_html: Path) -> None:  # noqa: ANN001
    open_viewer(page, model_html)
    page.get_by_role("button", name="Close all").click()
    page.locator("[data-module='blocks'].gv-closed").click()
    page.locator(".gv-roll.gv-closed").click()
    page.locator(".gv-roll.gv-open .gv-next-instance").click()
    page.locator(".gv-roll.gv-open .gv-next-instance").click()
    assert page.locator("[data-module='blocks.2']").count() == 1
    view = page.get_by_test_id("graph-viewer").get_attribute("data-view")
    assert "inst=" in view
    other = browser.new_page()
    try:
        open_viewer(other, model_html, view)
        assert other.locator("[data-module='blocks.2']").count() == 1
        assert other.locator("[data-module='blocks.0']").count() == 0
        assert "3 of 3" in other.locator(".gv-roll.gv-open").text_content()
    finally:
        other.close()


def test_nonfinite_gradient_statistics_show_as_such(page, tmp_path: Path) -> None:  # noqa: ANN001
    from dataclasses import replace

    graph = module_graph(1)
    grad = GradInfo(numel=8, norm=float("nan"), max_abs=float("inf"), mean_abs=1.0, nan=8)
    path = save(replace(graph, nodes=tuple(replace(n, grad=grad) if n.id == "n1" else n for n in graph.nodes)),
                tmp_path / "nan.html")
    open_viewer(page, path, "#open=0.1&sel=n1&color=gradient")
    text = page.get_by_test_id("viewer-details").inner_text()
    assert "gradient norm\tNaN" in text and "gradient max |g|\tInfinity" in text
    assert "gradient non-finite\t8 nan, 0 inf of 8" in text
    assert _fills(page)["n1"] == FLAG  # NaN in its gradient: drawn red
    assert page.errors == []


def test_a_hostile_or_stale_fragment_is_ignored_and_runs_nothing(page, model_html: Path) -> None:  # noqa: ANN001
    hostile = "<img src=x onerror=\"window.__pwned = 3\">"
    fragment = ("#open=0.99999.-1.x&inst=2:99&sel=" + quote(hostile) + "&color=" + quote("<script>")
                + "&expand=" + quote(hostile) + "&q=" + quote(hostile))
    viewer = open_viewer(page, model_html, fragment)
    assert viewer.get_attribute("data-state") == "ready"
    assert drawn_nodes(page), "the pane is blank"
    assert page.get_by_test_id("viewer-color").input_value() == "kind"
    assert page.get_by_test_id("viewer-search").input_value() == hostile  # the query, as text in the box
    assert page.evaluate("window.__pwned") is None
    assert page.locator("img, [onerror]").count() == 0 and page.errors == [] and page.dialogs == []


def _every_column_packed(path: Path) -> Path:
    """The file at `path` again with every column of its payload packed, as a million-node graph's are."""
    from graphviz_app.viewer.payload import encode

    text = path.read_text(encoding="utf-8")
    start = text.index('id="gv-payload">') + len('id="gv-payload">')
    end = text.index("<", start)
    data = json.loads(gzip.decompress(base64.b64decode(text[start:end])))
    packed = encode(data, pack_from=1)
    assert "$packed" in json.loads(gzip.decompress(base64.b64decode(packed)))["graph"]["edges"]["src"]
    path.write_text(text[:start] + packed + text[end:], encoding="utf-8")
    return path


def test_a_file_with_every_column_packed_shows_the_same_details_and_folds(page, tmp_path: Path) -> None:  # noqa: ANN001
    from dataclasses import replace

    graph = module_graph(1)
    fc = graph.nodes[3]
    fc = replace(fc, attrs=(("alpha", "1"), ("beta", "0.5")), tensor=replace(fc.tensor, values=(0.25, -1.5)))
    path = _every_column_packed(save(replace(graph, nodes=graph.nodes[:3] + (fc,) + graph.nodes[4:]),
                                     tmp_path / "packed.html"))
    open_viewer(page, path, "#open=0.1.2.3.4.5&sel=n3")
    text = page.get_by_test_id("viewer-details").inner_text()
    for expected in ("backward op", "8 elements, 32 B", "values", "0.25, -1.5", "attribute alpha", "attribute beta",
                     "mat1: (2, 4) float32 32 B", "blocks.0.fc (Linear)", "model.py:11 in forward", "gradient norm"):
        assert expected in text, expected
    chain = _every_column_packed(save(chain_graph(4000), tmp_path / "chain.html"))
    open_viewer(page, chain)
    fold = page.locator(".gv-fold.gv-closed")
    assert "SinBackward0 → MulBackward0 ×2,000" in fold.text_content()
    fold.click()
    assert "1 of 2,000" in page.locator(".gv-fold.gv-open").text_content()
