"""The viewer in a notebook: a real kernel runs a cell whose value is a Graph; its output shows the viewer."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from viewer_support import chain_graph, module_graph

from graphviz_app.drawing.notebook import SVG_MAX_NODES
from graphviz_app.viewer import viewer_html

ROOT = Path(__file__).resolve().parents[2]
CELL = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
sys.path.insert(0, {str(ROOT / "tests" / "support")!r})
from viewer_support import module_graph
module_graph(3, hostile=True)
"""


@pytest.fixture(scope="module")
def cell_html() -> str:
    nbformat = pytest.importorskip("nbformat", reason="nbformat is in the dev extra: pip install -e '.[dev]'")
    nbclient = pytest.importorskip("nbclient", reason="nbclient is in the dev extra: pip install -e '.[dev]'")
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(CELL)])
    nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(ROOT)}}).execute()
    outputs = notebook.cells[0].outputs
    assert [o["output_type"] for o in outputs] == ["execute_result"], outputs
    data = outputs[0]["data"]
    assert "image/svg+xml" in data and "text/plain" in data  # for front ends without HTML
    return data["text/html"]


@pytest.mark.slow
def test_the_cell_output_holds_the_viewer_in_a_sandboxed_frame(cell_html: str) -> None:
    pattern = (r'<iframe class="graphviz-app-viewer" [^>]*sandbox="allow-scripts allow-downloads"[^>]* '
               r'srcdoc="([^"]*)"></iframe>')
    frame = re.fullmatch(pattern, cell_html)
    assert frame is not None, cell_html[:300]
    page = html.unescape(frame.group(1))
    assert 'id="gv-payload"' in page and "GraphvizAppViewer.mount" in page
    assert "onerror" not in page  # the hostile names are inside the base64 payload


@pytest.mark.slow
@pytest.mark.browser
def test_the_cell_output_draws_in_chromium_and_runs_no_hostile_name(cell_html: str, page) -> None:  # noqa: ANN001
    page.set_content(f"<!DOCTYPE html><html><body>{cell_html}</body></html>")
    frame = page.frame_locator("iframe.graphviz-app-viewer")
    frame.locator("[data-testid=graph-viewer][data-state=ready]").wait_for()
    assert frame.locator("[data-node='n0']").count() == 1
    assert page.dialogs == [] and page.errors == []
    assert page.frames[1].evaluate("window.__pwned") is None


def test_the_cell_shows_the_same_page_as_the_file_and_a_big_graph_no_svg() -> None:
    graph = module_graph(3)
    frame = re.fullmatch(r'<iframe [^>]* srcdoc="([^"]*)"></iframe>', graph._repr_html_())
    assert frame is not None
    assert html.unescape(frame.group(1)) == viewer_html(graph)  # the same opening view as save(graph, "g.html")
    big = chain_graph(SVG_MAX_NODES)
    bundle = big._repr_mimebundle_()
    assert set(bundle) == {"text/html", "text/plain"}  # no layout of thousands of nodes in a cell
    assert "graphviz-app-viewer" in bundle["text/html"]
