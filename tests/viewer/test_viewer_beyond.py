"""The viewer in Chromium: a compiled region opened like a module box, a diff's colouring, orders of derivative."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn
from viewer_support import drawn_nodes, open_viewer

from graphviz_app import record_orders, save, trace, trace_model
from graphviz_app.analysis.diff_view import diff_view
from graphviz_app.drawing.diff_style import export_diff
from graphviz_app.model import NodeKind

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # torch.compile takes seconds on its first call

REGION = "[data-module='[compiled region 1]']"


@pytest.fixture(scope="module")
def compiled_html(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str], list[str]]:
    """A compiled MLP's graph as a viewer file, the ids of its region's ops and the region's module boxes."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
    torch.compiler.reset()
    y = torch.compile(model, backend="aot_eager")(torch.randn(3, 4, requires_grad=True)).sum()
    graph = trace(y, model)
    (region,) = graph.regions
    path = save(graph, tmp_path_factory.mktemp("compiled") / "compiled.html")
    return path, [n.id for n in region.nodes], [m.name for m in region.modules]


def test_the_compiled_region_opens_and_closes_like_a_module_box(page, compiled_html) -> None:  # noqa: ANN001
    path, ops, boxes = compiled_html
    open_viewer(page, path, "#open=0&expand=" + ",".join(boxes))  # every box of the region open: all its ops
    assert set(ops) <= set(drawn_nodes(page))
    page.get_by_role("button", name="Close all").click()
    closed = set(drawn_nodes(page))
    assert not closed & set(ops)  # the backward's ops are inside the closed box
    box = page.locator(f"{REGION}.gv-closed")
    assert box.count() == 1 and "[compiled region 1]" in box.text_content()
    box.click()
    assert page.locator(f"{REGION}.gv-open").count() == 1
    # Its ops are grouped by the forward module they differentiate: the linear layers' boxes inside it.
    assert page.locator("[data-module='[compiled region 1].0']").count() == 1
    page.locator(f"{REGION}.gv-open .gv-bar").click()  # its title bar closes it again
    assert set(drawn_nodes(page)) == closed
    assert page.errors == []


def test_the_diff_is_a_colouring_toggled_on_and_off(page, tmp_path: Path) -> None:  # noqa: ANN001
    torch.manual_seed(0)
    short = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    x = torch.randn(3, 4)
    a = trace_model(nn.Sequential(*short, nn.Tanh()), x)
    b = trace_model(nn.Sequential(*short, nn.Sigmoid()), x)
    view = diff_view(a, b)
    path = tmp_path / "diff.html"
    path.write_bytes(export_diff(a, b, "html"))
    modules = sorted({n.module for n in view.graph.nodes if n.module})
    open_viewer(page, path, "#open=0&expand=" + ",".join(modules))
    status = {n.name: (n.id, view.node_status(n.id)) for n in view.graph.nodes if n.kind is NodeKind.OP}
    ids = {name: status[name][0] for name in ("SigmoidBackward0", "TanhBackward0", "ReluBackward0")}
    assert [status[name][1] for name in ids] == ["added", "removed", "same"]
    assert set(ids.values()) <= set(drawn_nodes(page))
    colour = page.get_by_test_id("viewer-color")

    def fills() -> dict[str, str | None]:
        return {name: page.locator(f"[data-node='{i}'] .gv-shape").get_attribute("fill") for name, i in ids.items()}

    plain = fills()
    assert plain["SigmoidBackward0"] == plain["TanhBackward0"] == plain["ReluBackward0"]  # ops, by kind
    colour.select_option("diff")
    by_change = fills()
    assert len(set(by_change.values())) == 3  # added, removed and unchanged: each its own fill
    colour.select_option("kind")
    assert fills() == plain  # toggled off
    assert page.errors == []


def test_the_order_colouring_fills_each_order_of_derivative_its_own(page, tmp_path: Path) -> None:  # noqa: ANN001
    x = torch.tensor([0.3, -1.2, 2.0], requires_grad=True)
    with record_orders():
        (g,) = torch.autograd.grad(torch.tanh(x).sum(), x, create_graph=True)
        (h,) = torch.autograd.grad((g**2).sum(), x, create_graph=True)
    graph = trace(h.sum(), {"x": x})
    first = {n.order or 0: n.id for n in graph.nodes if n.kind is NodeKind.OP}  # one op of each order
    assert sorted(first) == [0, 1, 2]
    path = save(graph, tmp_path / "orders.html")
    open_viewer(page, path)
    colour = page.get_by_test_id("viewer-color")
    colour.select_option("order")
    fills = {order: page.locator(f"[data-node='{i}'] .gv-shape").get_attribute("fill") for order, i in first.items()}
    assert len(set(fills.values())) == 3  # the forward's ops, the first backward's and the second's
    assert page.errors == []
