"""Two graphs in synced panes in a notebook: a real kernel runs cells whose value is `compare(a, b)`; the saved
outputs, put on one page in Chromium, draw both panes, and a box opened or a node selected in one follows in the
other. The same value's `.save()` file opened from disk does the same."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

import pytest
from viewer_support import HOSTILE, compare_pair

from graphviz_app import compare
from graphviz_app.viewer.bundle import bundle_gzip
from graphviz_app.viewer.html import FIT_MAX_HEIGHT, FIT_MIN_HEIGHT

ROOT = Path(__file__).resolve().parents[2]
SETUP = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
sys.path.insert(0, {str(ROOT / "tests" / "support")!r})
from graphviz_app import compare
from viewer_support import HOSTILE, compare_pair, module_graph
a, b = compare_pair()
bad_a, bad_b = compare_pair(hostile=True)
"""
CELLS = ['compare(a, b, labels=("fp32", "bf16"))',  # the kernel's first viewer output: it carries the script
         "module_graph(2)",  # one graph between them: no script
         "compare(bad_a, bad_b, labels=(HOSTILE[0], HOSTILE[1]))"]
FRAME = r'<iframe class="graphviz-app-viewer" [^>]*sandbox="allow-scripts allow-downloads"[^>]* srcdoc="([^"]*)">'

pytestmark = [pytest.mark.slow]


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    nbformat = pytest.importorskip("nbformat", reason="nbformat is in the dev extra: pip install -e '.[dev]'")
    nbclient = pytest.importorskip("nbclient", reason="nbclient is in the dev extra: pip install -e '.[dev]'")
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in [SETUP, *CELLS]])
    nbclient.NotebookClient(notebook, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(ROOT)}}).execute()
    nbformat.write(notebook, str(tmp_path_factory.mktemp("nb") / "compare.ipynb"))
    data = []
    for cell in notebook.cells[1:]:
        results = [o for o in cell.outputs if o["output_type"] == "execute_result"]
        assert len(results) == 1, cell.outputs
        data.append(results[0]["data"])
    return data


def test_a_compare_cell_is_the_panes_and_carries_the_script_only_first(outputs: list[dict[str, Any]]) -> None:
    assert [d["text/html"].count('id="graphviz-app-bundle"') for d in outputs] == [1, 0, 0]
    assert bundle_gzip() in outputs[0]["text/html"]
    for d in (outputs[0], outputs[2]):
        frame = re.search(FRAME, d["text/html"])
        assert frame is not None, d["text/html"][:300]
        page = html.unescape(frame.group(1))
        assert "GraphvizAppViewer.mountCompare(" in page and 'id="gv-payload"' in page
        assert len(page) < 80_000  # styles, the two payloads and the loader: no script bundle
        assert "image/svg+xml" in d  # the diff as one picture, for front ends without HTML
        assert d["text/plain"].splitlines()[1].startswith("0 node(s) added, 4 removed")
    assert outputs[0]["text/plain"].startswith("Comparison('fp32': 15 nodes, 'bf16': 11 nodes)")
    later = outputs[2]["text/html"]
    title = f"{HOSTILE[0]} ⟷ {HOSTILE[1]}"
    attribute = re.search(r'<iframe class="graphviz-app-viewer" title="([^"]*)"', later)
    assert attribute is not None and html.unescape(attribute.group(1)) == title  # an attribute's text
    page = html.unescape(re.search(FRAME, later).group(1))  # type: ignore[union-attr]
    assert f"<title>{html.escape(title)}</title>" in page  # the frame's title: text, escaped
    assert "<img" not in page and "<svg" not in page and "__pwned" not in page.split("</title>", 1)[1]


def _panes(frame: Any) -> tuple[Any, Any]:
    frame.locator("[data-testid=compare][data-state=ready]").wait_for(timeout=60_000)
    a, b = frame.locator("[data-side=a]"), frame.locator("[data-side=b]")
    assert a.locator(".gv-node, .gv-group").count() > 0 and b.locator(".gv-node, .gv-group").count() > 0
    return a, b


def _follow(a: Any, b: Any, box: str) -> None:
    """A box opened (or closed) in a opens (closes) in b; a node selected in a selects its counterpart in b."""
    target = a.locator(box).first
    if "gv-open" in target.get_attribute("class"):  # the opening view may have opened it already
        target.locator(".gv-bar").first.click()
        assert "gv-closed" in b.locator(box).first.get_attribute("class")
    else:
        target.click()
        assert "gv-open" in b.locator(box).first.get_attribute("class")
    search = a.get_by_test_id("viewer-search")
    search.fill("blocks.0.fc.weight")
    search.press("Enter")
    selected = b.locator(".gv-node.gv-selected")
    assert selected.count() == 1 and "blocks.0.fc.weight" in selected.text_content()


def _changed_follows(a: Any, b: Any) -> None:
    """A changed node (mat1, float32 in a, bfloat16 in b) clicked in a is selected in b and coloured as changed."""
    a.locator("[data-roll='blocks.0']").click()
    a.locator("[data-module='blocks.0.fc']").click()
    a.locator(".gv-node").filter(has_text="mat1").click()
    selected = b.locator(".gv-node.gv-selected")
    assert selected.count() == 1 and "mat1" in selected.text_content() and "bfloat16" in selected.text_content()
    assert "gv-cmp-changed" in selected.get_attribute("class")


@pytest.mark.browser
def test_the_saved_outputs_draw_both_panes_in_step_without_a_kernel(outputs: list[dict[str, Any]],
                                                                    page) -> None:  # noqa: ANN001
    page.set_content("<!DOCTYPE html><html><body>" + "".join(d["text/html"] for d in outputs) + "</body></html>")
    frames = page.frame_locator("iframe.graphviz-app-viewer")
    first = _panes(frames.nth(0))
    frames.nth(1).locator("[data-testid=graph-viewer][data-state=ready]").wait_for(timeout=60_000)
    _follow(*first, "[data-roll='blocks.0']")
    a, b = _panes(frames.nth(2))  # a later cell: its frame got the script from the first cell's output
    assert a.locator(".gv-compare-label").inner_text() == HOSTILE[0]
    assert b.locator(".gv-compare-label").inner_text() == HOSTILE[1]
    _follow(a, b, "[data-module='blocks.0']")  # hostile names: the blocks differ, no roll
    assert page.dialogs == [] and page.errors == []
    for child in page.frames[1:]:
        assert child.evaluate("window.__pwned") is None
    assert all(u.startswith(("about:", "data:", "blob:")) for u in page.requests), page.requests


@pytest.mark.browser
def test_the_saved_file_draws_both_panes_in_step(page, tmp_path: Path) -> None:  # noqa: ANN001
    a_graph, b_graph = compare_pair()
    path = compare(a_graph, b_graph, labels=("fp32", "bf16")).save(tmp_path / "cmp.html")
    page.goto(path.as_uri())
    a, b = _panes(page)
    _changed_follows(a, b)
    assert page.title() == "fp32 ⟷ bf16"
    assert page.errors == [] and all(u.startswith("file://") for u in page.requests)


def _drawings_fill_the_panes(frame: Any) -> None:
    """Each pane's drawing is whole inside its pane, and one of them (the taller) fills its pane's width or height
    but for the viewer's own fit margin (20 px at the scale, and the layout's padding round the drawn boxes)."""
    gaps = []
    for side in "ab":
        pane = frame.locator(f"[data-side={side}] .gv-pane").bounding_box()
        drawing = frame.locator(f"[data-side={side}] .gv-viewport").bounding_box()
        assert pane and drawing, (pane, drawing)
        assert pane["x"] - 1 <= drawing["x"] and drawing["x"] + drawing["width"] <= pane["x"] + pane["width"] + 1
        assert pane["y"] - 1 <= drawing["y"] and drawing["y"] + drawing["height"] <= pane["y"] + pane["height"] + 1
        gaps.append(min(pane["width"] - drawing["width"], pane["height"] - drawing["height"]))
    assert min(gaps) <= 80, gaps


@pytest.mark.browser
def test_the_compare_frame_takes_its_drawings_height_and_its_grip_changes_it(outputs: list[dict[str, Any]],
                                                                            page) -> None:  # noqa: ANN001
    page.set_content("<!DOCTYPE html><html><body>" + outputs[0]["text/html"] + "</body></html>")
    frame = page.frame_locator("iframe.graphviz-app-viewer").first
    _panes(frame)
    element = page.locator("iframe.graphviz-app-viewer").first
    root = frame.locator("#gv-root")
    root.and_(frame.locator("[data-fit-height]")).wait_for()
    wanted = int(root.get_attribute("data-fit-height"))
    most = min(FIT_MAX_HEIGHT, round(page.evaluate("innerHeight") * 0.85))
    expected = max(FIT_MIN_HEIGHT, min(most, wanted))
    page.wait_for_function(f"document.querySelector('iframe.graphviz-app-viewer').offsetHeight === {expected}")
    assert expected != 720  # was the fixed height whatever the drawing
    _drawings_fill_the_panes(frame)
    grip = page.locator(".graphviz-app-grip").first
    assert grip.is_visible()
    box = grip.bounding_box()
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    before = element.bounding_box()["height"]
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x, y - 200, steps=5)  # over the frame: the page, not the frame, keeps the pointer
    page.mouse.up()
    after = element.bounding_box()["height"]
    assert abs(after - max(FIT_MIN_HEIGHT, before - 200)) <= 1, (before, after)
    grip.focus()
    page.keyboard.press("ArrowDown")  # the keys too: 40 px a press
    assert abs(element.bounding_box()["height"] - (after + 40)) <= 1
    frame.locator("[data-side=a] .gv-viewport").wait_for()
    _drawings_fill_the_panes(frame)  # fitted again to the smaller panes
    assert page.locator(".graphviz-app-fallback").first.is_hidden()  # the static picture shows only without frame
    assert page.errors == []
