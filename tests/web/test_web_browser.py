"""What a person sees in a real browser: headless Chromium against the server `make run` starts.

Screenshots of each state land in tests/artifacts/web-*.png.
"""

from __future__ import annotations

import re
from urllib.parse import quote

import pytest
from web_support import screenshot

pytestmark = pytest.mark.browser

SEED = "x = torch.arange(3., requires_grad=True)\n((x+2)**2+3).mean()"
OTHER = "y = torch.ones(2, requires_grad=True)\n(y * 5).sum()"
SEED_GRAD = "[1.3333, 2.0000, 2.6667]"
# Ops of ~3 s each, in a loop: one op of ~30 s is now refused before it runs (Limits.max_multiply_adds).
RUNAWAY = "a = torch.randn(400, 20000)\nfor i in range(1000):\n    b = torch.cdist(a, a, p=1).sum()\nb"


def graph_node(page, name: str):  # noqa: ANN001, ANN201
    """The drawn node labelled `name` in the graph viewer."""
    return page.locator("[data-testid=graph-viewer][data-state=ready] [data-node]", has_text=name).first


def node_names(page) -> set[str]:  # noqa: ANN001
    texts = page.locator("[data-testid=graph-viewer] [data-node] .gv-title").all_text_contents()
    return {t for t in texts if t.endswith(("Backward0", "Backward1"))}


def open_page(page, server, query: str = "") -> None:  # noqa: ANN001
    page.goto(f"{server.url}/{query}")
    page.get_by_test_id("program-editor").wait_for()


def type_program(page, text: str) -> None:  # noqa: ANN001
    editor = page.get_by_test_id("program-editor")
    editor.click()
    editor.press("Control+a")
    editor.press("Delete")
    editor.press_sequentially(text)


def run(page) -> None:  # noqa: ANN001
    page.get_by_role("button", name="Run", exact=True).click()


def error_text(page) -> str:  # noqa: ANN001
    alerts = page.locator("[data-testid='stAlertContentError']")
    alerts.first.wait_for()
    return "\n".join(alerts.all_inner_texts())


def test_type_the_seed_program_and_see_its_graph_and_gradient(page, server) -> None:  # noqa: ANN001
    open_page(page, server, "?program=" + quote(OTHER))
    graph_node(page, "MulBackward0").wait_for()
    type_program(page, SEED)
    run(page)
    graph_node(page, "MeanBackward0").wait_for()
    page.get_by_text(SEED_GRAD).wait_for()
    # Streamlit keeps the previous run's graph (greyed) until the rerun ends; then only the seed's is left.
    graph_node(page, "MulBackward0").wait_for(state="detached")
    assert "PowBackward0" in node_names(page)
    assert "MulBackward0" not in node_names(page)
    assert page.locator("[data-testid='stCaptionContainer']", has_text="7 nodes, 6 edges").count() == 1
    assert "7 nodes, 6 edges" in page.get_by_test_id("viewer-status").inner_text()
    page.wait_for_url("**?program=x+%3D+torch.arange**")  # the address bar is a link to this graph
    screenshot(page, "web-1-seed-graph")


def test_the_graph_zooms(page, server) -> None:  # noqa: ANN001
    open_page(page, server, "?program=" + quote(SEED))
    graph_node(page, "MeanBackward0").wait_for()
    drawing = page.locator("[data-testid=graph-viewer] .gv-viewport")
    before = drawing.bounding_box()["width"]
    page.get_by_role("button", name="Zoom in").click()
    page.get_by_role("button", name="Zoom in").click()
    assert drawing.bounding_box()["width"] == pytest.approx(before * 1.25**2, rel=1e-2)
    screenshot(page, "web-2-zoomed")


def test_a_parse_error_shows_while_typing(page, server) -> None:  # noqa: ANN001
    open_page(page, server, "?program=" + quote(SEED))
    graph_node(page, "MeanBackward0").wait_for()
    type_program(page, "x = torch.arange(3., requires_grad=True)\n((x+2)**2+3).mean(")
    assert "Will not run" in error_text(page)  # no Run pressed
    assert "line 2" in error_text(page)
    screenshot(page, "web-3-parse-error-while-typing")
    editor = page.get_by_test_id("program-editor")
    editor.press("End")
    editor.press_sequentially(") * 2")
    page.get_by_text("The program parses").wait_for()
    editor.press("Control+Enter")  # runs it, like the Run button
    page.get_by_text("[2.6667, 4.0000, 5.3333]").wait_for()


def test_a_wrong_hand_gradient_fails_with_the_factor_named(page, server) -> None:  # noqa: ANN001
    open_page(page, server, "?program=" + quote(SEED))
    graph_node(page, "MeanBackward0").wait_for()
    box = page.get_by_label("Your d(output)/dx: an expression over the program's variables")
    box.fill("2*(x+2)")
    box.press("Enter")
    text = error_text(page)
    assert "Your gradient d(output)/dx = 2*(x+2) is wrong: it is 3 × autograd's" in text
    assert "3 of 3 elements fail" in text
    table = page.locator("[data-testid='stTable']", has_text="finite differences")
    assert "x[2]" in table.inner_text()
    screenshot(page, "web-4-wrong-gradient", focus=table)
    box.fill("2*(x+2)/3")
    box.press("Enter")
    verdict = page.get_by_text("Your gradient d(output)/dx = 2*(x+2)/3 is right")
    verdict.wait_for()
    screenshot(page, "web-5-right-gradient", focus=verdict)


def test_a_matrix_jacobian_shows_an_error_heatmap(page, server) -> None:  # noqa: ANN001
    open_page(page, server)
    page.get_by_role("button", name="softmax + cross-entropy").click()
    graph_node(page, "NllLossBackward0").wait_for()
    box = page.get_by_label("Your d(output)/dlogits: an expression over the program's variables")
    box.fill("(torch.softmax(logits, dim=1) - F.one_hot(target, 5)) / 2")
    box.press("Enter")
    assert "is wrong" in error_text(page)
    # The check's heatmap: the memory panel's chart, in its closed expander, comes first and is hidden.
    chart = page.locator("[data-testid='stVegaLiteChart'] >> visible=true").first
    chart.wait_for()
    page.locator("[data-testid='stTable']", has_text="logits[2, 4]").wait_for()
    screenshot(page, "web-6-heatmap", focus=chart)


def test_hostile_and_runaway_programs_get_clear_errors_then_a_valid_one_renders(page, server) -> None:  # noqa: ANN001
    open_page(page, server, "?program=" + quote(SEED))
    graph_node(page, "MeanBackward0").wait_for()
    cases = [
        ("().__class__.__bases__", "attribute names starting with _ are not allowed", "web-7-hostile"),
        ("torch.randn(int(3e10))", "the limit is 10,000,000 elements per tensor", "web-8-memory-bomb"),
        # Stopped between statements, or (on a busy machine) inside one long op at the hard deadline.
        (RUNAWAY, re.compile(r"ran longer than (10 s \(Limits\.max_seconds\)|the time limit it set for one step)"),
         "web-9-runaway"),
    ]
    for program, words, shot in cases:
        type_program(page, program)
        run(page)
        # Under the editor ("Will not run") when the check before running finds it, else in
        # the graph pane ("Could not draw the graph"): one red box either way, never both.
        alert = page.locator("[data-testid='stAlertContentError']", has_text=words)
        alert.first.wait_for()
        assert alert.count() == 1
        assert "Traceback" not in page.content()
        screenshot(page, shot)
    type_program(page, OTHER)
    run(page)
    graph_node(page, "MulBackward0").wait_for()
    page.get_by_text("[5.0000, 5.0000]").wait_for()
    screenshot(page, "web-10-valid-after-errors")


def test_a_shared_link_shows_the_same_graph(page, server, browser) -> None:  # noqa: ANN001
    open_page(page, server)
    page.get_by_role("button", name="2-layer MLP").click()
    graph_node(page, "MmBackward0").wait_for()
    page.get_by_role("combobox", name="Layout direction").click()
    page.get_by_role("option", name="left to right").click()
    page.wait_for_url("**rankdir=LR**")
    graph_node(page, "ReluBackward0").wait_for()
    link, names = page.url, node_names(page)
    summary = page.locator("[data-testid='stCaptionContainer']", has_text="nodes,").first.inner_text()
    other = browser.new_context(viewport={"width": 1400, "height": 1900}).new_page()
    try:
        other.goto(link)
        graph_node(other, "ReluBackward0").wait_for()
        other.get_by_text("W1.grad").first.wait_for()  # the tables are drawn after the graph
        assert node_names(other) == names
        assert other.locator("[data-testid='stCaptionContainer']", has_text="nodes,").first.inner_text().split(
            " · ")[0] == summary.split(" · ")[0]
        tables = other.locator("[data-testid='stTable']").all_inner_texts()
        assert "W1.grad" in tables[1]
        assert tables == page.locator("[data-testid='stTable']").all_inner_texts()  # same values, same gradients
        screenshot(other, "web-11-shared-link")
    finally:
        other.context.close()


def test_downloads_hold_the_drawn_graph(page, server) -> None:  # noqa: ANN001
    open_page(page, server, "?program=" + quote(SEED))
    graph_node(page, "MeanBackward0").wait_for()
    contents = {}
    for label in ("SVG", "PNG", "DOT", "JSON"):
        with page.expect_download() as download:
            page.get_by_role("button", name=label, exact=True).click()
        contents[label] = open(download.value.path(), "rb").read()
    assert b"MeanBackward0" in contents["SVG"] and contents["SVG"].lstrip().startswith(b"<?xml")
    assert contents["PNG"].startswith(b"\x89PNG\r\n\x1a\n")
    assert b"digraph" in contents["DOT"] and b"MeanBackward0" in contents["DOT"]
    assert b'"schema": 2' in contents["JSON"]


def test_no_request_leaves_this_machine(server, request_log: list[str]) -> None:  # noqa: ANN001
    assert request_log, "the browser tests above made no request at all"
    outside = [u for u in request_log if not u.startswith((server.url, f"ws://127.0.0.1:{server.port}"))]
    outside = [u for u in outside if not u.startswith(("data:", "blob:", "about:"))]
    assert outside == []
    assert server.trap.requests == []  # nothing left the server through a proxy either


def test_ctrl_c_stops_the_server_cleanly(server) -> None:  # noqa: ANN001
    assert f"http://localhost:{server.port}" in server.log()
    assert server.stop() == 0
    log = server.log_path.read_text()
    assert "graphviz-app: stopped." in log
    assert "Traceback" not in log
