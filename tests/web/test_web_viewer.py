"""The graph viewer in a real browser: never blank, search, details; screenshots in tests/artifacts/web-view-*.png."""

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

pytestmark = pytest.mark.browser

SEED = "x = torch.arange(3., requires_grad=True)\n((x+2)**2+3).mean()"
CHAIN_200 = "h = torch.ones(3, requires_grad=True)\nfor i in range(198):\n    h = h * 1.01\nh.sum()"
# 182 blocks of matmul, layer norm, tanh and a residual add: 2,005 nodes (as benchmarks/bench_web.py).
BIG = """torch.manual_seed(0)
h = torch.randn(4, 16, requires_grad=True)
for i in range(182):
    W = (torch.randn(16, 16) * 0.25).requires_grad_()
    h = h + torch.tanh(F.layer_norm(h @ W, (16,)))
h.sum()"""


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    """The page, on a server of its own."""
    srv = Server()
    try:
        yield srv
    finally:
        srv.stop()


def open_graph(page, server, program: str, extra: str = "") -> None:  # noqa: ANN001
    page.goto(f"{server.url}/?program={quote(program)}{extra}")
    page.get_by_test_id("graph-pane").locator("svg g.node").first.wait_for()


def drawn_share(page, name: str) -> float:  # noqa: ANN001
    """The share of the graph pane's pixels that are not background (white)."""
    from PIL import Image

    png = settled_screenshot(page.get_by_test_id("graph-pane"))  # the first scroll to the output has ended
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / f"{name}.png").write_bytes(png)
    image = Image.open(io.BytesIO(png)).convert("L")
    counts = image.histogram()  # 256 grey levels
    return sum(counts[:235]) / sum(counts)


@pytest.mark.parametrize(("program", "extra", "name"), [
    (SEED, "", "web-view-1-seed"),
    (CHAIN_200, "", "web-view-2-chain-200"),
    (BIG, "&max_nodes=2500", "web-view-3-graph-2000"),
])
def test_the_pane_shows_the_graph_not_a_blank_corner(page, server, program: str, extra: str, name: str) -> None:  # noqa: ANN001
    open_graph(page, server, program, extra)
    assert drawn_share(page, name) > 0.02
    page.get_by_role("button", name="Fit").click()
    assert drawn_share(page, name + "-fit") > 0.002  # a long chain is a thin line when whole
    svg = page.get_by_test_id("graph-pane").locator("svg").first
    pane = page.get_by_test_id("graph-pane").bounding_box()
    box = svg.bounding_box()
    # Fit shows the whole graph: it is no bigger than the pane in either dimension
    assert box["width"] <= pane["width"] + 1 and box["height"] <= pane["height"] + 1


def test_a_graph_over_the_budget_says_what_is_hidden_and_has_an_overview(page, server) -> None:  # noqa: ANN001
    open_graph(page, server, BIG, "&max_nodes=2500")
    page.get_by_text("Showing the 1,500 nodes nearest the output of 2,005").wait_for()
    assert page.get_by_test_id("graph-minimap").is_visible()
    assert page.get_by_test_id("graph-pane").locator("svg g.node").count() <= 1501  # and the legend
    box = page.get_by_role("searchbox", name="Find nodes")
    box.fill("TanhBackward0")  # graphviz-pure drew this view: search works on its SVG too
    assert int(page.get_by_test_id("graph-search-count").inner_text().split()[0]) > 100
    box.press("Enter")
    assert page.get_by_test_id("graph-search-count").inner_text().startswith("1 of ")
    screenshot(page, "web-view-4-partial", focus=page.get_by_test_id("graph-viewer"))


def test_search_highlights_the_matching_node_and_next_goes_to_it(page, server) -> None:  # noqa: ANN001
    open_graph(page, server, SEED)
    box = page.get_by_role("searchbox", name="Find nodes")
    box.fill("MeanBackward0")
    count = page.get_by_test_id("graph-search-count")
    assert count.inner_text() == "1 found"
    matches = page.get_by_test_id("graph-pane").locator("svg g.gv-match")
    assert matches.count() == 1
    assert "MeanBackward0" in matches.first.text_content()
    box.press("Enter")
    assert count.inner_text() == "1 of 1"
    box.fill("float32")  # shapes and dtypes are found too
    assert int(count.inner_text().split()[0]) >= 4
    screenshot(page, "web-view-5-search", focus=page.get_by_test_id("graph-viewer"))


def test_clicking_a_node_shows_its_shape_and_dtype(page, server) -> None:  # noqa: ANN001
    open_graph(page, server, SEED)
    page.get_by_test_id("graph-pane").locator("svg g.node", has_text="PowBackward0").first.click()
    panel = page.get_by_test_id("graph-details")
    panel.wait_for()
    text = panel.inner_text()
    assert "PowBackward0" in text
    assert "shape\n(3,)" in text and "dtype\nfloat32" in text
    assert "attribute exponent" in text
    screenshot(page, "web-view-6-details", focus=page.get_by_test_id("graph-viewer"))


def test_the_svg_is_sent_once_not_on_every_rerun(page, server) -> None:  # noqa: ANN001
    received: list[int] = []
    page.on("websocket", lambda ws: ws.on("framereceived", lambda frame: received.append(len(frame))))
    count_script_runs(page)
    open_graph(page, server, BIG, "&max_nodes=2500")
    page.get_by_text("Showing the 1,500 nodes").wait_for()
    first = sum(received)
    assert first > 1_000_000  # the 1,500-node SVG and its details came once
    received.clear()
    ended = script_runs_ended(page)
    editor = page.get_by_test_id("program-editor")
    editor.click()
    editor.press("End")
    editor.press_sequentially("  # a comment")  # each pause reruns the page (live parse check)
    page.get_by_text("The program parses").wait_for()
    wait_for_runs_after(page, ended)
    assert 0 < sum(received) < 100_000  # the reruns happened, and the graph was not sent again


def drawn_nodes(page) -> list[str]:  # noqa: ANN001
    """The labels' first lines of the nodes drawn in the graph pane."""
    nodes = page.get_by_test_id("graph-pane").locator("svg g.node")
    return [nodes.nth(i).locator("text").first.text_content() or "" for i in range(nodes.count())]


def test_a_module_box_opens_on_click_closes_again_and_a_link_reproduces_it(page, server) -> None:  # noqa: ANN001
    """The gallery's 6-layer transformer encoder: open a 3-D box, close it, share the opened view."""
    from graphviz_app.web.gallery import example

    name = "enc.layers.5.self_attn"
    open_graph(page, server, example("transformer").program)
    pane = page.get_by_test_id("graph-pane")
    box = pane.locator("svg g.node", has_text=f"{name}: MultiheadAttention").first
    box.wait_for()
    before = drawn_nodes(page)
    box.click()
    close = page.get_by_role("button", name=f"✕ {name}")
    close.wait_for()
    page.wait_for_url(f"**expand={name}**")
    box.wait_for(state="detached")  # the box is open: its ops are drawn instead
    opened = drawn_nodes(page)
    assert len(opened) > len(before) + 20  # MultiheadAttention makes dozens of backward ops
    screenshot(page, "web-view-7-module-opened", focus=page.get_by_test_id("graph-viewer"))
    link = page.url

    close.click()
    box.wait_for()
    page.wait_for_url(lambda url: "expand=" not in url)  # the address bar follows the page's rerun
    assert sorted(drawn_nodes(page)) == sorted(before)

    page.goto(link)  # whoever opens the link sees the module opened
    close.wait_for()
    pane.locator("svg g.node").first.wait_for()
    assert box.count() == 0
    assert sorted(drawn_nodes(page)) == sorted(opened)
