"""In Chromium: a line between closed boxes in the compare panes takes the change of the edges it stands for,
in the nodes' palette and dash, in the light and the dark theme."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from viewer_support import compare_pair

from graphviz_app import save, trace_model

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# The palette of viewer.css, per theme: what nodes and box outlines of each change are drawn in.
PALETTE = {"light": {"added": "rgb(47, 158, 68)", "removed": "rgb(224, 49, 49)", "changed": "rgb(232, 89, 12)"},
           "dark": {"added": "rgb(105, 219, 124)", "removed": "rgb(255, 135, 135)", "changed": "rgb(255, 169, 77)"}}


class Power(nn.Module):
    def __init__(self, exponent: int) -> None:
        super().__init__()
        self.exponent = exponent

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x ** self.exponent


def _pow_pair(tmp_path: Path) -> Path:
    """fc1 -> act (x**2, against x**3) -> fc2: only act's PowBackward0 changed, its exponent."""
    graphs = []
    for exponent in (2, 3):
        torch.manual_seed(0)
        model = nn.Sequential()
        model.add_module("fc1", nn.Linear(4, 4))
        model.add_module("act", Power(exponent))
        model.add_module("fc2", nn.Linear(4, 1))
        graphs.append(trace_model(model, torch.randn(2, 4)))
    return save((graphs[0], graphs[1]), tmp_path / "pow.html", labels=("square", "cube"))


def _open_closed(page: Any, path: Path, scheme: str) -> tuple[Any, Any]:
    """The file opened in `scheme`, every box closed in both panes ("Close all" acts on both)."""
    page.emulate_media(color_scheme=scheme)
    page.goto(path.as_uri())
    page.wait_for_selector("[data-testid=compare][data-state=ready], [data-state=error]")
    assert page.locator("[data-state=error]").count() == 0, page.locator("[data-state=error]").inner_text()
    a, b = page.locator("[data-side=a]"), page.locator("[data-side=b]")
    a.get_by_role("button", name="Close all").click()
    assert a.locator(".gv-box.gv-open").count() == b.locator(".gv-box.gv-open").count() == 0
    return a, b


def _stroke(locator: Any) -> dict[str, str]:
    return locator.evaluate("e => { const s = getComputedStyle(e); "
                            "return {stroke: s.stroke, dash: s.strokeDasharray, width: s.strokeWidth}; }")


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_lines_into_and_out_of_a_closed_box_whose_op_changed_are_drawn_changed(
        page, tmp_path: Path, scheme: str) -> None:  # noqa: ANN001
    a, b = _open_closed(page, _pow_pair(tmp_path), scheme)
    summary = page.get_by_test_id("compare-summary").inner_text()
    assert summary == "square ⟷ cube: 0 removed (only in square), 0 added (only in cube), 1 changed"
    for pane in (a, b):
        act = pane.locator("[data-module='act']")
        assert "gv-cmp-holds-changed" in act.get_attribute("class")
        lines = pane.locator("path.gv-cmp-edge-changed")
        assert lines.count() == 2  # fc1 -> act and act -> fc2: PowBackward0 is an end of both
        box = _stroke(act.locator("rect.gv-frame, .gv-shape").first)
        for k in range(2):
            line = _stroke(lines.nth(k))
            assert line["stroke"] == box["stroke"] == PALETTE[scheme]["changed"]  # the nodes' palette
            assert line["dash"] in ("none", "")
        assert pane.locator("path.gv-cmp-edge-added, path.gv-cmp-edge-removed").count() == 0
    # Opened, the PowBackward0 is drawn (orange itself) and the lines reach it: they are no longer marked.
    a.locator("[data-module='act']").click()
    for pane in (a, b):
        pow_node = pane.locator(".gv-node.gv-cmp-changed").filter(has_text="PowBackward0")
        assert pow_node.count() == 1
        assert pane.locator("path.gv-cmp-edge-changed").count() == 0
    details = a.locator(".gv-node").filter(has_text="PowBackward0")
    details.click()
    assert "exponent changed" in b.get_by_test_id("viewer-details").inner_text()
    assert "2 → 3" in a.get_by_test_id("viewer-details").inner_text()
    assert page.errors == [] and all(u.startswith("file://") for u in page.requests)


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_a_line_standing_for_an_edge_only_one_graph_has_is_removed_or_added(
        page, tmp_path: Path, scheme: str) -> None:  # noqa: ANN001
    pair = compare_pair()
    path = save(pair, tmp_path / "cmp.html", labels=("fp32", "bf16"))
    a, b = _open_closed(page, path, scheme)
    removed, added = a.locator("path.gv-cmp-edge-removed"), b.locator("path.gv-cmp-edge-added")
    # blocks -> head: blocks.2's act fed the head in fp32, blocks.1's in bf16 (between two closed boxes)
    assert removed.count() == 1 and added.count() == 1
    for pane, line in ((a, removed), (b, added)):
        src, dst = line.get_attribute("data-edge").split(">")
        assert pane.locator(f"[data-node='{src}']").count() == 0 and pane.locator(f"[data-node='{dst}']").count() == 0
    blocks_a = _stroke(a.locator("[data-module='blocks'], [data-roll='blocks.0']").first.locator(
        "rect.gv-frame, .gv-shape").first)
    gone, new = _stroke(removed), _stroke(added)
    assert gone["stroke"] == blocks_a["stroke"] == PALETTE[scheme]["removed"]  # as the box holding the removed layer
    assert gone["dash"] not in ("none", "") and gone["dash"] == blocks_a["dash"]  # dashed, as removed nodes are
    assert new["stroke"] == PALETTE[scheme]["added"] and new["dash"] in ("none", "")
    a.get_by_test_id("viewer-theme").click()  # the toggle: both panes' lines take the other theme's colours
    other = "light" if scheme == "dark" else "dark"
    assert _stroke(removed)["stroke"] == PALETTE[other]["removed"]
    assert _stroke(added)["stroke"] == PALETTE[other]["added"]
    assert page.errors == []
