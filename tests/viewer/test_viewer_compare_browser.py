"""Two graphs in synced panes, in Chromium: a box opened, a node selected or a view moved in one pane follows in
the other; a removed layer shows as removed; hostile names and labels stay text; 10,000 nodes a side."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from viewer_support import HOSTILE, compare_pair, module_graph

from graphviz_app import save

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _open(page: Any, path: Path) -> tuple[Any, Any]:
    page.goto(path.as_uri())
    page.wait_for_selector("[data-testid=compare][data-state=ready], [data-state=error]")
    assert page.locator("[data-state=error]").count() == 0, page.locator("[data-state=error]").inner_text()
    return page.locator("[data-side=a]"), page.locator("[data-side=b]")


def _pair_file(tmp_path: Path, **kw: Any) -> Path:
    a, b = compare_pair(**kw)
    return save((a, b), tmp_path / "cmp.html", labels=kw.pop("labels", ("fp32", "bf16")))


def _classes(pane: Any, selector: str) -> str:
    return pane.locator(selector).first.get_attribute("class")


def test_a_box_opened_in_one_pane_opens_in_the_other_both_ways(page, tmp_path: Path) -> None:  # noqa: ANN001
    a, b = _open(page, _pair_file(tmp_path))
    assert a.locator("[data-module='blocks.0.fc']").count() == b.locator("[data-module='blocks.0.fc']").count() == 0
    a.locator("[data-roll='blocks.0']").click()  # the roll blocks.0–2 ×3 (in b: blocks.0–1 ×2)
    assert "gv-open" in _classes(b, "[data-roll='blocks.0']")
    a.locator("[data-module='blocks.0.fc']").click()
    assert "gv-open" in _classes(b, "[data-module='blocks.0.fc']")
    assert b.locator("[data-module='blocks.0.fc'].gv-selected").count() == 1
    b.locator("[data-module='blocks.0.fc'] .gv-bar").click()  # closed in b: closed in a
    assert "gv-closed" in _classes(a, "[data-module='blocks.0.fc']")
    assert page.errors == [] and all(u.startswith("file://") for u in page.requests)


def test_a_selection_follows_to_the_counterpart_and_its_details_say_what_changed(page, tmp_path: Path) -> None:  # noqa: ANN001
    a, b = _open(page, _pair_file(tmp_path))
    a.locator("[data-roll='blocks.0']").click()
    a.locator("[data-module='blocks.0.fc']").click()
    a.locator(".gv-node").filter(has_text="mat1").click()  # blocks.0.fc's saved input
    selected_a = a.locator(".gv-node.gv-selected")
    selected_b = b.locator(".gv-node.gv-selected")
    assert selected_a.count() == 1 and selected_b.count() == 1
    assert "mat1" in selected_b.text_content() and "bfloat16" in selected_b.text_content()
    assert "gv-cmp-changed" in selected_b.get_attribute("class")
    details = b.get_by_test_id("viewer-details").inner_text()
    assert re.search(r"in fp32\s+mat1 \(n\d+\)", details) and re.search(r"dtype changed\s+float32 → bfloat16", details)
    page.get_by_test_id("compare-colour").select_option("delta:memory")  # the delta overlay, for both panes
    chosen = [pane.get_by_test_id("viewer-color").input_value() for pane in (a, b)]
    assert chosen == ["delta:memory", "delta:memory"]
    selected_b.click()
    assert re.search(r"Δ saved bytes \(bf16 − fp32\)\s+−16 B", b.get_by_test_id("viewer-details").inner_text())
    assert selected_a.count() == 1  # and back: the selection in b selected a's node
    assert page.errors == []


def test_a_removed_layer_shows_as_removed_and_has_no_counterpart(page, tmp_path: Path) -> None:  # noqa: ANN001
    a, b = _open(page, _pair_file(tmp_path))
    a.get_by_test_id("viewer-search").fill("blocks.2.fc.weight")
    a.get_by_test_id("viewer-search").press("Enter")
    node = a.locator(".gv-node.gv-selected")
    assert node.count() == 1 and "gv-cmp-removed" in node.get_attribute("class")
    dash = node.locator(".gv-shape").evaluate("e => getComputedStyle(e).strokeDasharray")
    assert dash not in ("", "none")  # an unmatched node is dashed
    assert re.search(r"in bf16\s+none: only in fp32 \(removed\)", a.get_by_test_id("viewer-details").inner_text())
    assert b.locator(".gv-selected").count() == 0  # nothing to select in bf16
    weight_id = node.get_attribute("data-node")
    edge = a.locator(f"path[data-edge^='{weight_id}>']")
    assert edge.count() == 1 and "gv-cmp-edge-removed" in edge.get_attribute("class")  # its edge: only in fp32
    assert a.locator("[data-module='blocks.2.fc'].gv-cmp-holds-removed").count() == 1
    summary = page.get_by_test_id("compare-summary").inner_text()
    assert summary == "fp32 ⟷ bf16: 4 removed (only in fp32), 0 added (only in bf16), 2 changed"


def test_pan_and_zoom_in_one_pane_move_the_other_the_same_way(page, tmp_path: Path) -> None:  # noqa: ANN001
    a, b = _open(page, _pair_file(tmp_path))

    def transform(pane: Any) -> list[float]:
        text = pane.locator(".gv-viewport").get_attribute("transform")
        return [float(x) for x in re.findall(r"-?[\d.]+(?:e-?\d+)?", text)]

    before_a, before_b = transform(a), transform(b)
    box = a.get_by_test_id("viewer-pane").bounding_box()
    page.mouse.move(box["x"] + 200, box["y"] + 200)
    page.mouse.down()
    page.mouse.move(box["x"] + 260, box["y"] + 150, steps=4)
    page.mouse.up()
    after_a, after_b = transform(a), transform(b)
    assert after_a[0] - before_a[0] == pytest.approx(after_b[0] - before_b[0], abs=0.01)
    assert after_a[1] - before_a[1] == pytest.approx(after_b[1] - before_b[1], abs=0.01)
    b.get_by_role("button", name="Zoom in").click()
    assert transform(a)[2] == pytest.approx(after_a[2] * 1.25, rel=1e-3)  # the scale follows from b to a


def test_hostile_names_and_labels_stay_text_and_nothing_is_fetched(page, tmp_path: Path) -> None:  # noqa: ANN001
    a_graph, b_graph = compare_pair(hostile=True)
    path = save((a_graph, b_graph), tmp_path / "cmp.html", labels=(HOSTILE[0], HOSTILE[1]))
    a, b = _open(page, path)
    assert a.locator(".gv-compare-label").inner_text() == HOSTILE[0]
    assert b.locator(".gv-compare-label").inner_text() == HOSTILE[1]
    a.get_by_test_id("viewer-search").fill("blocks.0.act")
    a.get_by_test_id("viewer-search").press("Enter")
    assert b.locator(".gv-node.gv-selected").count() == 1
    assert HOSTILE[0] in b.get_by_test_id("viewer-details").inner_text()  # the counterpart row names it as text
    assert page.evaluate("window.__pwned") is None and page.dialogs == [] and page.errors == []
    assert page.locator("img, [onerror], [onload]").count() == 0
    assert all(u.startswith("file://") for u in page.requests)


def test_two_graphs_of_ten_thousand_nodes_open_and_follow(page, tmp_path: Path) -> None:  # noqa: ANN001
    a_graph, b_graph = module_graph(2500), module_graph(2499)  # 10,003 and 9,999 nodes; the last block removed
    assert len(a_graph.nodes) >= 10_000
    path = save((a_graph, b_graph), tmp_path / "big.html", labels=("2500 blocks", "2499 blocks"))
    a, b = _open(page, path)
    assert a.locator("[data-node], [data-group]").count() > 1 and b.locator("[data-node], [data-group]").count() > 1
    a.get_by_test_id("viewer-search").fill("blocks.1234.fc.weight")
    a.get_by_test_id("viewer-search").press("Enter")
    assert "blocks.1234.fc.weight" in b.locator(".gv-node.gv-selected").text_content()
    assert "2500 blocks ⟷ 2499 blocks: 4 removed" in page.get_by_test_id("compare-summary").inner_text()
    assert page.errors == []


# For every node outlined by change: WCAG contrast of its labels on its fill, and of its outline on the pane.
_CHANGE_CONTRASTS = """() => {
  const rgb = (c) => c.match(/[\\d.]+/g).slice(0, 3).map(Number);
  const lum = (c) => {
    const v = rgb(c).map((x) => { x /= 255; return x <= 0.03928 ? x / 12.92 : ((x + 0.055) / 1.055) ** 2.4; });
    return 0.2126 * v[0] + 0.7152 * v[1] + 0.0722 * v[2];
  };
  const ratio = (a, b) => {
    const [hi, lo] = [lum(a), lum(b)].sort((x, y) => y - x);
    return (hi + 0.05) / (lo + 0.05);
  };
  const found = [];
  for (const item of document.querySelectorAll('.gv-cmp-removed, .gv-cmp-added, .gv-cmp-changed')) {
    if (!item.closest('.gv-viewport')) continue;
    const shape = item.querySelector(':scope > .gv-shape');
    const pane = getComputedStyle(item.closest('[data-testid=viewer-pane]')).backgroundColor;
    for (const t of item.querySelectorAll(':scope > text')) {
      found.push([item.getAttribute('class'), ratio(getComputedStyle(t).fill, getComputedStyle(shape).fill),
                  ratio(getComputedStyle(shape).stroke, pane), lum(pane)]);
    }
  }
  return found;
}"""


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_change_colours_are_readable_in_both_themes_and_the_toggle_sets_both_panes(
        page, tmp_path: Path, scheme: str) -> None:  # noqa: ANN001
    page.emulate_media(color_scheme=scheme)
    a, b = _open(page, _pair_file(tmp_path))
    for pane in (a, b):
        pane.get_by_test_id("viewer-search").fill("mat1")
        pane.get_by_test_id("viewer-search").press("Enter")  # opens boxes down to a mat1: removed or changed
    a.get_by_test_id("viewer-search").fill("blocks.2.fc.weight")
    a.get_by_test_id("viewer-search").press("Enter")
    seen = page.evaluate(_CHANGE_CONTRASTS)
    kinds = {c.split("gv-cmp-")[1].split()[0] for c, *_ in seen}
    assert {"removed", "changed"} <= kinds, seen
    assert all((lum < 0.1) == (scheme == "dark") for *_, lum in seen)  # the panes follow the system
    low = [(c, round(text, 2), round(edge, 2)) for c, text, edge, _ in seen if text < 4.5 or edge < 3]
    assert not low, f"{scheme}: change colours below 4.5:1 (text) or 3:1 (outline): {low}"
    a.get_by_test_id("viewer-theme").click()
    themes = page.eval_on_selector_all("[data-testid=graph-viewer], [data-testid=compare]",
                                       "els => els.map(e => e.dataset.theme)")
    assert themes == ["light" if scheme == "dark" else "dark"] * 3
    low = [(c, round(text, 2), round(edge, 2)) for c, text, edge, _ in page.evaluate(_CHANGE_CONTRASTS)
           if text < 4.5 or edge < 3]
    assert not low, f"after the toggle: {low}"


def test_stepping_a_rolled_box_steps_its_counterpart_unless_the_other_lacks_that_layer(page, tmp_path: Path) -> None:  # noqa: ANN001
    a, b = _open(page, _pair_file(tmp_path))
    a.locator("[data-roll='blocks.0']").click()

    def shown(pane: Any) -> str:
        return pane.locator("[data-roll='blocks.0'] .gv-instance").text_content()

    assert (shown(a), shown(b)) == ("1 of 3", "1 of 2")
    a.locator("[data-roll='blocks.0'] .gv-next-instance").click()
    assert (shown(a), shown(b)) == ("2 of 3", "2 of 2")
    a.locator("[data-roll='blocks.0'] .gv-next-instance").click()  # blocks.2: only in fp32
    assert (shown(a), shown(b)) == ("3 of 3", "2 of 2")
    assert page.errors == []


def test_the_panes_view_is_kept_in_the_address_and_a_link_reopens_both_panes_as_they_were(
        page, tmp_path: Path) -> None:  # noqa: ANN001
    path = _pair_file(tmp_path)
    a, b = _open(page, path)
    a.locator("[data-roll='blocks.0']").click()
    a.locator("[data-module='blocks.0.fc']").click()
    a.locator(".gv-node").filter(has_text="mat1").click()
    page.wait_for_function("location.hash.includes('sel=')")
    view = page.evaluate("location.hash")
    assert "open=" in view
    other = page.context.new_page()
    errors: list[str] = []
    other.on("pageerror", lambda e: errors.append(str(e)))
    other.goto(path.as_uri() + view)
    other.wait_for_selector("[data-testid=compare][data-state=ready]")
    a2, b2 = other.locator("[data-side=a]"), other.locator("[data-side=b]")
    for pane in (a2, b2):  # the box opened in a is open in both; the selection and its counterpart are back
        assert "gv-open" in _classes(pane, "[data-module='blocks.0.fc']")
        selected = pane.locator(".gv-node.gv-selected")
        assert selected.count() == 1 and "mat1" in selected.text_content()
    assert "bfloat16" in b2.locator(".gv-node.gv-selected").text_content()
    assert other.evaluate("location.hash") == view  # opening it changed nothing
    assert page.errors == [] and errors == []
    other.close()
