"""The page's interactive viewer in a real browser; screenshots in tests/artifacts/web-view-*.png.

The viewer is the one of the HTML file and the notebook (graphviz_app.viewer), with the same test hooks:
`graph-viewer`, `viewer-search`, `viewer-details`, `data-node`, `data-module`.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from urllib.parse import quote

import pytest
from web_support import (
    ARTIFACTS,
    Server,
    count_script_runs,
    screenshot,
    script_runs_ended,
    settled_screenshot,
    wait_for_runs_after,
)

from graphviz_app.web.gallery import example

pytestmark = pytest.mark.browser

SEED = "x = torch.arange(3., requires_grad=True)\n((x+2)**2+3).mean()"
OTHER = "y = torch.ones(2, requires_grad=True)\n(y * 5).sum()"
CHAIN_200 = "h = torch.ones(3, requires_grad=True)\nfor i in range(198):\n    h = h * 1.01\nh.sum()"
# 182 blocks of matmul, layer norm, tanh and a residual add: 2,005 nodes (as benchmarks/bench_web.py).
BIG = """torch.manual_seed(0)
h = torch.randn(4, 16, requires_grad=True)
for i in range(182):
    W = (torch.randn(16, 16) * 0.25).requires_grad_()
    h = h + torch.tanh(F.layer_norm(h @ W, (16,)))
h.sum()"""
READY = "[data-testid=graph-viewer][data-state=ready]"


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    """The page, on a server of its own."""
    srv = Server()
    try:
        yield srv
    finally:
        srv.stop()


def viewer(page):  # noqa: ANN001, ANN201
    return page.locator(READY)


def open_graph(page, server, program: str, extra: str = "") -> None:  # noqa: ANN001
    page.goto(f"{server.url}/?program={quote(program)}{extra}")
    page.locator(READY).wait_for(timeout=120_000)


def drawn(page) -> list[str]:  # noqa: ANN001
    """The ids of the nodes drawn now."""
    return page.locator(f"{READY} [data-node]").evaluate_all("els => els.map(e => e.getAttribute('data-node'))")


def drawn_share(page, name: str) -> float:  # noqa: ANN001
    """The share of the viewer pane's pixels that are not background."""
    from PIL import Image

    png = settled_screenshot(page.get_by_test_id("viewer-pane"))  # the opening view has been drawn
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / f"{name}.png").write_bytes(png)
    image = Image.open(io.BytesIO(png)).convert("L")
    counts = image.histogram()  # 256 grey levels; the pane's background is #fbfcfe
    return sum(counts[:235]) / sum(counts)


@pytest.mark.parametrize(("program", "extra", "name"), [
    (SEED, "", "web-view-1-seed"),
    (CHAIN_200, "", "web-view-2-chain-200"),
    (BIG, "&max_nodes=2500", "web-view-3-graph-2000"),
])
def test_the_viewer_is_on_the_page_and_not_blank(page, server, program: str, extra: str, name: str) -> None:  # noqa: ANN001
    open_graph(page, server, program, extra)
    assert drawn(page), "no node drawn"
    assert drawn_share(page, name) > 0.01
    page.get_by_role("button", name="Fit").click()
    assert drawn_share(page, name + "-fit") > 0.002  # a long chain is a thin line when whole
    pane = page.get_by_test_id("viewer-pane").bounding_box()
    box = page.locator(f"{READY} .gv-viewport").bounding_box()
    # Fit shows the whole drawing: it is no bigger than the pane in either dimension
    assert box["width"] <= pane["width"] + 1 and box["height"] <= pane["height"] + 1


def test_the_graph_gets_the_full_width_below_the_editor(page, server) -> None:  # noqa: ANN001
    open_graph(page, server, SEED)
    pane = page.get_by_test_id("viewer-pane").bounding_box()
    content = page.get_by_test_id("stMainBlockContainer").evaluate(  # the page's width inside its padding
        "e => { const s = getComputedStyle(e); return e.clientWidth - parseFloat(s.paddingLeft)"
        " - parseFloat(s.paddingRight); }")
    editor = page.get_by_test_id("stCode").or_(page.locator(".monaco-editor, .ace_editor, textarea")).first
    assert pane["width"] >= 0.97 * content, (pane, content)
    assert pane["y"] >= editor.bounding_box()["y"] + editor.bounding_box()["height"]


def test_labels_open_readable_at_least_10_px(page, server) -> None:  # noqa: ANN001
    open_graph(page, server, example("transformer").program)
    sizes = page.locator(f"{READY} [data-node] text").evaluate_all(
        "els => els.map(e => e.getScreenCTM().a * parseFloat(getComputedStyle(e).fontSize))")
    assert sizes and min(sizes) >= 10
    screenshot(page, "web-view-4-readable", focus=page.get_by_test_id("graph-viewer"))


def test_roll_is_on_by_default_the_six_layers_are_one_box(page, server) -> None:  # noqa: ANN001
    open_graph(page, server, example("transformer").program)
    page.get_by_role("button", name="Close all").click()
    page.locator("[data-module='enc'].gv-closed").click()
    page.locator("[data-module='enc.layers'].gv-closed").click()
    roll = page.locator(".gv-roll")
    assert "enc.layers.0–5: TransformerEncoderLayer ×6" in roll.first.text_content()


def test_a_box_opens_in_the_browser_without_a_server_round_trip_and_the_link_keeps_it(page, server, browser) -> None:  # noqa: ANN001
    open_graph(page, server, example("transformer").program)
    page.get_by_role("button", name="Close all").click()
    box = page.locator("[data-module='enc'].gv-closed")
    # Click and read the drawing in one go, inside the page's script: no message from the server can
    # arrive in between, so a change seen here was made in the browser.
    before, after = box.evaluate("""el => {
        const root = el.closest('[data-testid=graph-viewer]');
        const shown = () => [...root.querySelectorAll('[data-group]')].map(g => g.getAttribute('class')).join('|');
        const before = shown();
        for (const type of ['pointerdown', 'pointerup']) {
            el.dispatchEvent(new PointerEvent(type, {bubbles: true, button: 0, isPrimary: true}));
        }
        return [before, shown()];
    }""")
    assert before != after
    assert page.locator("[data-module='enc'].gv-open").count() == 1
    assert page.locator("[data-module='enc.layers'].gv-closed").count() == 1
    page.wait_for_url("**view=**")  # then the page hears of the view, for its link
    screenshot(page, "web-view-5-box-opened", focus=page.get_by_test_id("graph-viewer"))
    other = browser.new_context(viewport={"width": 1400, "height": 1900}).new_page()
    try:
        other.goto(page.url)
        other.locator(READY).wait_for(timeout=120_000)
        assert other.locator("[data-module='enc'].gv-open").count() == 1
        assert other.locator("[data-module='enc.layers'].gv-closed").count() == 1
    finally:
        other.context.close()


def test_search_finds_a_node_inside_a_closed_box_and_opens_its_path(page, server) -> None:  # noqa: ANN001
    open_graph(page, server, example("transformer").program)
    page.get_by_role("button", name="Close all").click()
    assert page.locator(f"{READY} [data-node]").evaluate_all(
        "els => els.filter(e => e.textContent.includes('ReluBackward0')).length") == 0
    search = page.get_by_test_id("viewer-search")
    search.fill("ReluBackward0")  # one in each of the six layers, all inside the closed enc box
    search.press("Enter")
    selected = page.locator(f"{READY} [data-node].gv-selected")
    selected.wait_for()
    assert "ReluBackward0" in selected.text_content()
    assert page.get_by_test_id("viewer-count").inner_text() == "1 of 6"
    assert page.locator("[data-module='enc'].gv-open").count() == 1  # its path opened
    details = page.get_by_test_id("viewer-details").inner_text()
    assert "ReluBackward0" in details and "enc.layers." in details
    screenshot(page, "web-view-6-search", focus=page.get_by_test_id("graph-viewer"))


def test_a_graph_over_the_old_budget_is_whole_and_searchable(page, server) -> None:  # noqa: ANN001
    open_graph(page, server, BIG, "&max_nodes=2500")
    assert page.get_by_text("nearest the output").count() == 0  # nothing left out
    assert "2,005 nodes" in page.get_by_test_id("viewer-status").inner_text()
    search = page.get_by_test_id("viewer-search")
    search.fill("TanhBackward0")
    search.press("Enter")
    assert page.get_by_test_id("viewer-count").inner_text() == "1 of 182"


def test_clicking_a_node_shows_its_shape_and_dtype(page, server) -> None:  # noqa: ANN001
    open_graph(page, server, SEED)
    page.locator(f"{READY} [data-node]", has_text="PowBackward0").first.click()
    panel = page.get_by_test_id("viewer-details")
    panel.wait_for()
    text = panel.inner_text()
    assert "PowBackward0" in text
    assert "shape\t(3,)" in text and "dtype\tfloat32" in text
    assert "attribute exponent" in text


def test_the_graph_is_sent_once_and_the_viewer_script_once_per_visit(page, server) -> None:  # noqa: ANN001
    received: list[int] = []
    page.on("websocket", lambda ws: ws.on("framereceived", lambda frame: received.append(len(frame))))
    count_script_runs(page)
    open_graph(page, server, BIG, "&max_nodes=2500")
    first = sum(received)
    assert first > 200_000  # the viewer's script and the 2,005-node graph came once
    received.clear()
    ended = script_runs_ended(page)
    editor = page.get_by_test_id("program-editor")
    editor.click()
    editor.press("End")
    editor.press_sequentially("  # a comment")  # each pause reruns the page (live parse check)
    page.get_by_text("The program parses").wait_for()
    wait_for_runs_after(page, ended)
    assert 0 < sum(received) < 100_000  # the reruns happened, and the graph was not sent again
    received.clear()
    editor.press("Control+a")
    editor.press("Delete")
    editor.press_sequentially(OTHER)
    page.get_by_role("button", name="Run", exact=True).click()
    page.locator(f"{READY} [data-node]", has_text="MulBackward0").first.wait_for()
    assert sum(received) < 200_000  # a new graph brings its own data, not the 1.5 MB viewer script again


def only_the_new_viewer(page) -> None:  # noqa: ANN001
    """Wait until the last run's viewer has left the page (Streamlit removes it when the rerun ends)."""
    from playwright.sync_api import expect

    expect(page.get_by_test_id("viewer-search")).to_have_count(1, timeout=60_000)


def test_find_is_empty_for_a_new_program(page, server) -> None:  # noqa: ANN001
    open_graph(page, server, SEED)
    page.get_by_test_id("viewer-search").fill("MeanBackward0")
    editor = page.get_by_test_id("program-editor")
    editor.click()
    editor.press("Control+a")
    editor.press("Delete")
    editor.press_sequentially(OTHER)
    page.get_by_role("button", name="Run", exact=True).click()
    page.locator(f"{READY} [data-node]", has_text="MulBackward0").first.wait_for()
    only_the_new_viewer(page)
    assert page.get_by_test_id("viewer-search").input_value() == ""


def test_the_editor_opens_scrolled_home(page, server) -> None:  # noqa: ANN001
    program = "x = torch.ones(3, requires_grad=True)\n(x * 2).sum()  # " + "a long comment " * 30
    open_graph(page, server, program)
    editor = page.get_by_test_id("program-editor")
    editor.focus()  # a caret left at the end would scroll the editor sideways now
    assert editor.evaluate("e => [e.selectionStart, e.scrollLeft, e.scrollTop]") == [0, 0, 0]


def saved_graph_bytes() -> bytes:
    from viewer_support import module_graph

    return module_graph(3, hostile=True).to_json().encode()


def test_an_uploaded_graph_shows_and_its_hostile_names_run_nothing(page, server) -> None:  # noqa: ANN001
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.add_init_script("window.alert = (m) => { window.__alerted = String(m); };")
    open_graph(page, server, SEED)
    page.locator("input[type=file]").set_input_files(
        files=[{"name": "hostile.json", "mimeType": "application/json", "buffer": saved_graph_bytes()}])
    status = page.get_by_test_id("viewer-status").filter(has_text="hostile.json")
    status.wait_for(timeout=120_000)
    assert "15 nodes" in status.inner_text()
    page.get_by_text("hostile.json (saved graph): 15 nodes, 14 edges").wait_for()
    # its module table (the memory panel's table names modules too)
    page.locator("[data-testid='stTable']", has_text="param bytes").filter(has_text="blocks.0.fc").wait_for()
    only_the_new_viewer(page)
    search = page.get_by_test_id("viewer-search")
    search.fill("pwned")
    for _ in range(3):
        search.press("Enter")
    details = page.get_by_test_id("viewer-details").inner_text()
    assert "window.__pwned" in details  # the name, shown as text
    assert page.evaluate("[window.__pwned, window.__alerted]") == [None, None]
    assert dialogs == []
    assert page.locator("[data-testid=graph-viewer] img, [data-testid=graph-viewer] [onerror]").count() == 0
    screenshot(page, "web-view-7-uploaded", focus=page.get_by_test_id("graph-viewer"))


def test_a_hostile_upload_is_refused_and_the_page_keeps_working(page, server) -> None:  # noqa: ANN001
    open_graph(page, server, SEED)
    page.locator("input[type=file]").set_input_files(
        files=[{"name": "deep.json", "mimeType": "application/json", "buffer": b"[" * 200_000}])
    alert = page.locator("[data-testid='stAlertContentError']", has_text="Could not open the saved graph")
    alert.wait_for(timeout=120_000)
    assert "nests its JSON deeper than the reader goes" in alert.inner_text()
    page.get_by_role("button", name="Run", exact=True).click()  # back to the program
    page.locator(f"{READY} [data-node]", has_text="MeanBackward0").first.wait_for()
