"""The viewer in a notebook: a real kernel runs cells whose value is a Graph; their outputs show the viewer."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

import pytest
from viewer_support import chain_graph, module_graph

from graphviz_app.drawing.notebook import PICTURE_MAX_BOXES, SVG_MAX_NODES, module_picture
from graphviz_app.viewer.bundle import bundle_gzip
from graphviz_app.viewer.html import FIT_MAX_HEIGHT, FIT_MIN_HEIGHT

ROOT = Path(__file__).resolve().parents[2]
SETUP = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
sys.path.insert(0, {str(ROOT / "tests" / "support")!r})
"""
FRAME = (r'<iframe class="graphviz-app-viewer" [^>]*sandbox="allow-scripts allow-downloads"[^>]* '
         r'srcdoc="([^"]*)"></iframe>')


def _run(cells: list[str], path: Path | None = None) -> list[dict[str, Any]]:
    """Run `cells` after the set-up cell in a real kernel; each cell's one output's data (saved to `path`)."""
    nbformat = pytest.importorskip("nbformat", reason="nbformat is in the dev extra: pip install -e '.[dev]'")
    nbclient = pytest.importorskip("nbclient", reason="nbclient is in the dev extra: pip install -e '.[dev]'")
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in [SETUP, *cells]])
    nbclient.NotebookClient(notebook, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(ROOT)}}).execute()
    if path is not None:
        nbformat.write(notebook, str(path))
    data = []
    for cell in notebook.cells[1:]:
        results = [o for o in cell.outputs if o["output_type"] == "execute_result"]  # (a warning is a stream)
        assert len(results) == 1 and all(o["output_type"] == "stream" for o in cell.outputs if o not in results)
        data.append(results[0]["data"])
    return data


@pytest.fixture(scope="module")
def cells_html() -> list[str]:
    cells = ["from viewer_support import module_graph\nmodule_graph(3, hostile=True)",
             "module_graph(2)", "module_graph(4, hostile=True)"]
    data = _run(cells)
    for d in data:
        assert "image/svg+xml" in d and "text/plain" in d  # for front ends without HTML
    return [d["text/html"] for d in data]


@pytest.mark.slow
def test_only_the_first_cell_carries_the_script_and_every_frame_holds_its_payload(cells_html: list[str]) -> None:
    carried = [h.count('id="graphviz-app-bundle"') for h in cells_html]
    assert carried == [1, 0, 0]
    assert bundle_gzip() in cells_html[0]
    for cell in cells_html:
        frame = re.search(FRAME, cell)
        assert frame is not None, cell[:300]
        page = html.unescape(frame.group(1))
        assert 'id="gv-payload"' in page and "GraphvizAppViewer.mount" in page
        assert "onerror" not in page  # the hostile names are inside the base64 payload
        assert len(page) < 60_000  # styles, payload and the loader: no script bundle


@pytest.mark.slow
@pytest.mark.browser
def test_saved_outputs_draw_every_cell_without_a_kernel(cells_html: list[str], page) -> None:  # noqa: ANN001
    # The outputs alone on one page, as a front end shows a reopened notebook: the later cells' frames
    # get the script from the first cell's output.
    page.set_content(f"<!DOCTYPE html><html><body>{''.join(cells_html)}</body></html>")
    for index in range(3):
        frame = page.frame_locator("iframe.graphviz-app-viewer").nth(index)
        frame.locator("[data-testid=graph-viewer][data-state=ready]").wait_for(timeout=60_000)
        assert frame.locator("[data-node='n0']").count() == 1
    assert page.dialogs == [] and page.errors == []
    for child in page.frames[1:]:
        assert child.evaluate("window.__pwned") is None


@pytest.mark.slow
@pytest.mark.browser
def test_a_frame_without_the_script_on_the_page_says_what_to_do(cells_html: list[str], page) -> None:  # noqa: ANN001
    page.set_content(f"<!DOCTYPE html><html><body>{cells_html[1]}</body></html>")  # the first output cleared
    note = page.frame_locator("iframe.graphviz-app-viewer").locator("[data-testid=viewer-no-bundle]")
    note.wait_for(timeout=30_000)
    assert "Trust the notebook, or restart the kernel and run all cells" in note.inner_text()
    assert page.errors == []


@pytest.mark.slow
@pytest.mark.browser
def test_a_frame_asks_again_when_the_script_beside_it_runs_late(cells_html: list[str], page) -> None:  # noqa: ANN001
    # Front ends run an output's scripts when they choose: here the hand-over script runs after the frames load.
    inert = [re.sub(r"<script>(.*?)</script></div>$", r'<script type="text/plain">\1</script></div>', c, flags=re.S)
             for c in cells_html]
    page.set_content(f"<!DOCTYPE html><html><body>{''.join(inert)}</body></html>")
    page.wait_for_timeout(1500)
    page.evaluate("""() => { for (const old of document.querySelectorAll('script[type="text/plain"]')) {
        const s = document.createElement("script"); s.textContent = old.textContent; old.replaceWith(s); } }""")
    for index in range(3):
        frame = page.frame_locator("iframe.graphviz-app-viewer").nth(index)
        frame.locator("[data-testid=graph-viewer][data-state=ready]").wait_for(timeout=60_000)
    assert page.errors == []


@pytest.mark.slow
def test_three_gpt2_cells_make_a_notebook_under_2_mb_with_module_pictures(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    make = "from real_models import gpt2\ng = gpt2(12)\ng"
    path = tmp_path / "three.ipynb"
    data = _run([make, "gpt2(12)", "gpt2(12)"], path)
    size = path.stat().st_size
    assert size <= 2_000_000, f"{size:,} bytes"
    from real_models import gpt2

    graph = gpt2(12)
    assert len(graph.nodes) > 1000  # GPT-2's 12 blocks, every op
    picture = module_picture(graph)
    assert 3 <= len(picture.nodes) <= PICTURE_MAX_BOXES
    for d in data:
        svg = d["image/svg+xml"]
        drawn = svg.count('class="node"')  # the module-level picture (a note may add one), not every op
        assert len(picture.nodes) <= drawn <= len(picture.nodes) + 2, drawn
        assert "×12" in svg  # the 12 blocks rolled into one box


def test_a_later_cell_omits_the_script_and_a_big_graph_no_svg() -> None:
    graph = module_graph(3)
    graph._repr_mimebundle_()
    later = graph._repr_mimebundle_()["text/html"]
    assert 'id="graphviz-app-bundle"' not in later and len(later) < 100_000
    assert re.search(FRAME, later) is not None
    alone = graph._repr_html_()  # shown alone (not by the kernel's display): always carries the script
    assert alone.count('id="graphviz-app-bundle"') == 1 and graph._repr_mimebundle_()["text/html"] == later
    big = chain_graph(SVG_MAX_NODES + 1)
    bundle = big._repr_mimebundle_()
    assert set(bundle) == {"text/html", "text/plain"}  # no layout of thousands of nodes in a cell
    assert "graphviz-app-viewer" in bundle["text/html"]


@pytest.mark.slow
@pytest.mark.browser
def test_each_frame_takes_the_height_its_drawing_asks_for(cells_html: list[str], page) -> None:  # noqa: ANN001
    page.set_content(f"<!DOCTYPE html><html><body>{''.join(cells_html)}</body></html>")
    most = min(FIT_MAX_HEIGHT, round(page.evaluate("innerHeight") * 0.85))
    for index in range(3):
        frame = page.frame_locator("iframe.graphviz-app-viewer").nth(index)
        frame.locator("#gv-root[data-fit-height]").wait_for(timeout=60_000)
        wanted = int(frame.locator("#gv-root").get_attribute("data-fit-height"))
        expected = max(FIT_MIN_HEIGHT, min(most, wanted))
        page.wait_for_function(f"document.querySelectorAll('iframe.graphviz-app-viewer')[{index}].offsetHeight"
                               f" === {expected}")
        pane = frame.get_by_test_id("viewer-pane").bounding_box()
        drawing = frame.locator(".gv-viewport").bounding_box()
        assert pane and drawing and drawing["height"] <= pane["height"] + 1  # the whole drawing shows
        assert pane["height"] - drawing["height"] <= 80 or expected in (FIT_MIN_HEIGHT, most), (pane, drawing)
    assert page.errors == []


@pytest.mark.parametrize(("options", "message"), [
    ({"height": 0}, r"height must be a whole number of px from 1 up \(like 640\), got 0"),
    ({"height": 640.5}, r"height must be a whole number of px from 1 up \(like 640\), got 640.5"),
    ({"height": True}, r"height must be a whole number of px from 1 up \(like 640\), got True"),
    ({"mount": "mountEverything"}, r"mount must be one of mount, mountCompare, got 'mountEverything'"),
])
def test_a_bad_frame_option_is_refused_by_name(options: dict[str, Any], message: str) -> None:
    from graphviz_app.viewer.html import notebook_cell
    from graphviz_app.viewer.payload import payload

    with pytest.raises(ValueError, match=message):
        notebook_cell(payload(module_graph(1)), **options)


def test_the_fallback_follows_the_frame_and_fit_can_be_left_off() -> None:
    from graphviz_app.viewer.html import notebook_cell
    from graphviz_app.viewer.payload import payload

    data = payload(module_graph(1))
    shown = notebook_cell(data, fallback="<p>picture</p>", with_bundle=False)
    frame_at, grip_at, fallback_at = (shown.index(s) for s in ("<iframe", "<div class=\"graphviz-app-grip\"",
                                                                 "<div class=\"graphviz-app-fallback\""))
    assert frame_at < grip_at < fallback_at  # the style rules hide the fallback and show the grip after a frame
    assert "iframe.graphviz-app-viewer ~ .graphviz-app-fallback { display: none }" in shown
    assert 'data-fit-min="320" data-fit-max="1200"' in shown and "height: 640px" in shown
    assert "<div class=\"graphviz-app-fallback\"" not in notebook_cell(data, with_bundle=False)  # none given: none
    page = html.unescape(re.search(FRAME, notebook_cell(data, fit=False, with_bundle=False)).group(1))  # type: ignore[union-attr]
    assert "if (!false) return;" in page  # the frame asks for no height
    small = notebook_cell(data, height=200, with_bundle=False)
    assert 'data-fit-min="200"' in small  # never more than the height asked for


@pytest.mark.slow
@pytest.mark.browser
def test_a_frame_asks_again_as_opened_boxes_need_more_height_and_keeps_a_dragged_one(page) -> None:  # noqa: ANN001
    from graphviz_app.viewer.html import notebook_html

    page.set_content(f"<!DOCTYPE html><html><body>{notebook_html(module_graph(3), height=320)}</body></html>")
    most = min(FIT_MAX_HEIGHT, round(page.evaluate("innerHeight") * 0.85))
    frame = page.frame_locator("iframe.graphviz-app-viewer").first
    root = frame.locator("#gv-root")
    root.locator("xpath=self::*[@data-fit-height]").wait_for(timeout=60_000)

    def settled(asks: int) -> int:
        """The frame's height once it has asked `asks` times: what it asked for, within the page's bounds."""
        root.locator(f"xpath=self::*[@data-fit-asks='{asks}']").wait_for(timeout=30_000)
        expected = max(FIT_MIN_HEIGHT, min(most, int(root.get_attribute("data-fit-height"))))
        page.wait_for_function(f"document.querySelector('iframe.graphviz-app-viewer').offsetHeight === {expected}")
        return expected

    first = settled(1)
    frame.locator("[data-module='head'].gv-closed").click()  # opened later: the drawing needs more
    second = settled(2)
    assert second > first
    frame.locator("[data-roll='blocks.0'].gv-closed").click()
    third = settled(3)
    assert third >= second and (third > second or third == most)
    assert int(root.get_attribute("data-fit-height")) > first  # asked for more, never for less
    # A height the person chose stays: the grip's arrow key, then a box opened asks in vain.
    page.locator(".graphviz-app-grip").focus()
    page.keyboard.press("ArrowUp")
    chosen = third - 40
    page.wait_for_function(f"document.querySelector('iframe.graphviz-app-viewer').offsetHeight === {chosen}")
    frame.locator("[data-module='blocks.0.fc'].gv-closed").click()
    root.locator("xpath=self::*[@data-fit-asks='4']").wait_for(timeout=30_000)
    page.wait_for_timeout(300)  # the page's answer, had it taken the ask, is one message away
    assert page.evaluate("document.querySelector('iframe.graphviz-app-viewer').offsetHeight") == chosen
    assert page.errors == []
