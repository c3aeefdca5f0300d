"""The viewer in a real JupyterLab: a server on a free local port runs a notebook's cells from JupyterLab's own menu
in headless Chromium; each graph and a compare(a, b) pair draw in JupyterLab's output area and answer clicks; the
saved notebook, reopened with its kernel shut down, still draws; a notebook not trusted shows the static picture."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from viewer_jupyterlab import KERNEL_NAME, Lab, jupyterlab
from viewer_support import module_graph
from waiting import wait_until

from graphviz_app.drawing.notebook import UNTRUSTED_NOTE, mimebundle
from graphviz_app.viewer.html import FIT_MIN_HEIGHT

pytest.importorskip("jupyterlab", reason="JupyterLab is in the dev extra: pip install -e '.[dev]'")
nbformat = pytest.importorskip("nbformat", reason="nbformat is in the dev extra: pip install -e '.[dev]'")

pytestmark = [pytest.mark.slow, pytest.mark.browser]

ROOT = Path(__file__).resolve().parents[2]
# A small model traced in the kernel, the same model under autocast bfloat16 beside it, and a second graph.
CELLS = [
    """import torch
from torch import nn
from graphviz_app import compare, record, trace, trace_model
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
x = torch.randn(8, 16)
graph = trace_model(model, x, gradients=True)
graph""",
    """with record(model):
    fp32 = trace(model(x).sum(), model)
with record(model), torch.autocast("cpu", dtype=torch.bfloat16):
    bf16 = trace(model(x).float().sum(), model)
compare(fp32, bf16, labels=("fp32", "bf16"))""",
    "trace_model(nn.Sequential(nn.Linear(4, 3), nn.Tanh()), torch.randn(2, 4))",
]
OUTPUT = ".jp-OutputArea-output"
FRAME = f"{OUTPUT} iframe.graphviz-app-viewer"
READY = "[data-testid=graph-viewer][data-state=ready], [data-testid=compare][data-state=ready]"
# Bound a hang on a busy machine, never a speed: a kernel importing torch and running the cells, a click.
WAIT_MS = 180_000
UI_MS = 60_000


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    kernel_path = [str(ROOT), str(ROOT / "tests" / "support")]  # the kernel imports this checkout
    with jupyterlab(tmp_path_factory.mktemp("jupyterlab"), python_path=kernel_path) as server:
        yield server


@pytest.fixture(scope="module")
def lab_page(lab: Lab, browser) -> Iterator[Any]:  # noqa: ANN001
    """JupyterLab with the notebook open, every cell run from the Run menu."""
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": KERNEL_NAME, "language": "python"}
    nbformat.write(notebook, str(lab.root / "graphs.ipynb"))
    context = browser.new_context(viewport={"width": 1300, "height": 900})
    page = context.new_page()
    page.set_default_timeout(UI_MS)
    page.errors = []
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    try:
        page.goto(lab.tree("graphs.ipynb", workspace="graphs"))
        _kernel_idle(page)
        page.locator(".jp-Cell").first.click()  # the notebook is the current document: the Run menu acts on it
        page.get_by_role("menuitem", name="Run", exact=True).click()
        page.locator("li[data-command='runmenu:run-all']").click()
        page.locator(f"{OUTPUT} iframe.graphviz-app-viewer").nth(2).wait_for(timeout=WAIT_MS)
        _kernel_idle(page)
        yield page
    finally:
        context.close()


def _kernel_idle(page: Any) -> None:
    """Wait for the status bar to say the notebook's kernel is connected and idle (before it: "No Kernel")."""
    page.locator(".jp-StatusBar-TextItem", has_text=f"{KERNEL_NAME} | Idle").first.wait_for(timeout=WAIT_MS)


def _frames(page: Any) -> list[Any]:
    """Each viewer frame in an output area (the notebook's three), once drawn."""
    page.locator(FRAME).nth(len(CELLS) - 1).wait_for(timeout=WAIT_MS)
    frames = page.frame_locator(FRAME)
    found = [frames.nth(i) for i in range(page.locator(FRAME).count())]
    for frame in found:
        frame.locator(READY).first.wait_for(timeout=WAIT_MS)
    return found


def _inside(page: Any, index: int, frame: Any, selector: str) -> None:
    """The first `selector` of frame `index` is on screen inside that frame, inside a JupyterLab output area."""
    element = page.locator(FRAME).nth(index)
    element.scroll_into_view_if_needed()
    area = page.locator(OUTPUT).filter(has=page.locator("iframe.graphviz-app-viewer")).nth(index).bounding_box()
    outer = element.bounding_box()
    inner = frame.locator(selector).first.bounding_box()  # in the page's coordinates
    assert area and outer and inner, (area, outer, inner)
    assert area["x"] <= outer["x"] and outer["x"] + outer["width"] <= area["x"] + area["width"] + 1
    assert outer["x"] <= inner["x"] and inner["x"] + inner["width"] <= outer["x"] + outer["width"] + 1
    assert outer["y"] <= inner["y"] and inner["y"] + inner["height"] <= outer["y"] + outer["height"] + 1


def test_each_cell_draws_in_jupyterlabs_output_area_and_answers_clicks(lab_page: Any) -> None:
    page = lab_page
    one, _, other = _frames(page)
    assert page.locator(FRAME).count() == 3
    assert page.locator(f"{OUTPUT} #graphviz-app-bundle").count() == 1  # the first cell carries the script
    _inside(page, 0, one, "[data-module='0']")
    box = one.locator("[data-module='0']")  # the first Linear, a closed box on the opening view
    assert "gv-closed" in box.get_attribute("class") and one.locator("[data-node]").count() > 0
    box.click()
    assert "gv-open" in one.locator("[data-module='0']").get_attribute("class")
    one.locator(".gv-node").filter(has_text="AddmmBackward0").first.click()
    details = one.get_by_test_id("viewer-details")
    assert details.is_visible() and "AddmmBackward0" in details.inner_text()
    _inside(page, 2, other, ".gv-node, .gv-box")  # the third cell: its frame got the script from the first
    assert other.locator("[data-node]").count() > 0
    assert page.errors == []


def test_a_compare_cell_keeps_both_panes_in_step_in_jupyterlab(lab_page: Any) -> None:
    page = lab_page
    pair = _frames(page)[1]
    a, b = pair.locator("[data-side=a]"), pair.locator("[data-side=b]")
    _inside(page, 1, pair, "[data-side=a] .gv-box")
    box = "[data-module='0']"
    if "gv-open" not in a.locator(box).get_attribute("class"):
        a.locator(box).click()
    assert "gv-open" in a.locator(box).get_attribute("class")
    assert "gv-open" in b.locator(box).get_attribute("class")  # the counterpart opened
    a.locator(".gv-node").filter(has_text="AddmmBackward0").first.click()
    chosen = b.locator(".gv-node.gv-selected")
    assert chosen.count() == 1 and "AddmmBackward0" in chosen.text_content()
    assert page.errors == []


def test_the_compare_frame_fits_its_drawing_and_a_person_can_drag_it(lab_page: Any) -> None:
    page = lab_page
    _frames(page)
    frame = page.locator(FRAME).nth(1)
    wanted = int(page.frame_locator(FRAME).nth(1).locator("#gv-root").get_attribute("data-fit-height"))
    most = max(FIT_MIN_HEIGHT, min(1200, round(page.evaluate("innerHeight") * 0.85)))
    expected = max(FIT_MIN_HEIGHT, min(most, wanted))
    page.wait_for_function(f"document.querySelectorAll({FRAME!r})[1].getBoundingClientRect().height === {expected}")
    assert expected != 720  # the drawing's own height, not the old fixed one
    grip = page.locator(f"{OUTPUT} .graphviz-app-grip").nth(1)
    grip.scroll_into_view_if_needed()
    handle = grip.bounding_box()
    assert handle and handle["height"] >= 8 and grip.is_visible()
    x, y = handle["x"] + handle["width"] / 2, handle["y"] + handle["height"] / 2
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x, y - 150, steps=6)
    page.mouse.up()
    dragged = frame.bounding_box()["height"]
    assert FIT_MIN_HEIGHT <= dragged <= expected - 140, (expected, dragged)
    pane = page.frame_locator(FRAME).nth(1).locator("[data-side=a] .gv-box").first
    assert pane.is_visible()


def test_the_saved_notebook_reopened_with_its_kernel_shut_down_still_draws(lab: Lab, lab_page: Any) -> None:
    page = lab_page
    _frames(page)
    page.keyboard.press("Control+s")
    saved = lab.root / "graphs.ipynb"

    def outputs() -> list[int]:
        try:
            cells = nbformat.read(str(saved), as_version=4).cells
        except (OSError, ValueError):  # read while JupyterLab writes it
            return []
        return [len(c.outputs) for c in cells]

    wait_until(lambda: outputs() == [1, 1, 1], timeout=120, what="JupyterLab saving the three outputs")
    counts = [c.execution_count for c in nbformat.read(str(saved), as_version=4).cells]
    ran = {k["id"] for k in lab.api("api/kernels")}
    assert len(ran) == 1
    page.get_by_role("menuitem", name="Kernel", exact=True).click()
    page.locator("li[data-command='kernelmenu:shutdown']").click()
    wait_until(lambda: lab.api("api/kernels") == [], timeout=120, what="the kernel shutting down")
    page.reload()
    frames = _frames(page)
    assert len(frames) == 3
    assert ran.isdisjoint(k["id"] for k in lab.api("api/kernels"))  # (JupyterLab may start a fresh, idle one)
    for frame in frames:
        assert frame.locator("[data-node], [data-group]").count() > 0
        assert frame.get_by_test_id("viewer-no-bundle").count() == 0
    assert [c.execution_count for c in nbformat.read(str(saved), as_version=4).cells] == counts
    assert page.errors == []


def test_a_notebook_not_trusted_shows_the_static_picture_until_trusted(lab: Lab, browser) -> None:  # noqa: ANN001
    cell = nbformat.v4.new_code_cell("module_graph(3)", execution_count=1)
    data = mimebundle(module_graph(3), standalone=True)
    cell.outputs = [nbformat.v4.new_output("execute_result", data=data, execution_count=1)]
    notebook = nbformat.v4.new_notebook(cells=[cell])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": KERNEL_NAME, "language": "python"}
    nbformat.write(notebook, str(lab.root / "untrusted.ipynb"))  # written here: not signed, so not trusted
    context = browser.new_context(viewport={"width": 1300, "height": 900})
    page = context.new_page()
    page.set_default_timeout(UI_MS)
    try:
        page.goto(lab.tree("untrusted.ipynb", workspace="untrusted"))
        page.bring_to_front()  # the module's other JupyterLab page stays open: this one takes the focus
        output = page.locator(OUTPUT).first
        output.wait_for()
        picture = output.locator(".graphviz-app-fallback img")
        picture.wait_for()
        assert picture.is_visible() and picture.bounding_box()["height"] > 50
        assert UNTRUSTED_NOTE in output.inner_text()
        assert output.locator("iframe, script").count() == 0  # JupyterLab's sanitizer took them out
        assert "graphviz-app-bundle" not in output.inner_text()  # and not the script's text either
        page.get_by_role("menuitem", name="View", exact=True).click()
        page.locator("li[data-command='apputils:activate-command-palette']").click()
        page.locator(".lm-CommandPalette-input").fill("Trust Notebook")
        page.locator(".lm-CommandPalette-item[data-command='notebook:trust']").click()
        page.locator(".jp-Dialog-button.jp-mod-accept").click()
        frame = page.frame_locator(FRAME).first
        frame.locator(READY).first.wait_for(timeout=WAIT_MS)
        assert frame.locator("[data-node], [data-group]").count() > 0
        assert not page.locator(f"{OUTPUT} .graphviz-app-fallback").first.is_visible()
    finally:
        context.close()
