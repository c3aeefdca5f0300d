"""Your own numbers on the graph: overlays by node id or module name, checked, in the payload and the page."""

from __future__ import annotations

import base64
import gzip
import json
import math
import re
from pathlib import Path

import pytest
from viewer_support import HOSTILE, module_graph, open_viewer

from graphviz_app import save
from graphviz_app.errors import UnsupportedFormatError
from graphviz_app.viewer import viewer_html
from graphviz_app.viewer.payload import payload, user_overlays
from graphviz_app.viewer.tree import build_tree


def _box(tree_data: dict, module: str) -> int:
    return next(g for g, (k, m) in enumerate(zip(tree_data["kind"], tree_data["module"], strict=True))
                if k == "module" and m == module)


def test_node_values_colour_nodes_and_their_boxes_sum_them_unless_a_module_has_its_own() -> None:
    graph = module_graph(2)
    data = payload(graph, user={"latency_ms": {"n2": 1.5, "n3": 2.0, "head": 7.0}})
    mine = [o for o in data["overlays"] if o["label"] == "latency_ms"]
    assert len(mine) == 1
    o, tree = mine[0], data["tree"]
    assert o["key"] == "user:latency_ms" and o["scale"] == "linear" and o["unit"] == ""
    assert o["node"][2] == 1.5 and o["node"][3] == 2.0 and o["node"][0] is None
    assert o["group"][0] == 3.5  # the graph: the sum of its nodes' values
    assert o["group"][_box(tree, "head")] == 7.0  # a module given its own value keeps it
    assert o["group"][_box(tree, "blocks.1.act")] == 1.5


def test_values_spanning_more_than_a_hundredfold_get_a_log_scale() -> None:
    graph = module_graph(2)
    [o] = user_overlays(graph, build_tree(graph), {"flops": {"n1": 10.0, "n2": 1e6}})
    assert o["scale"] == "log"
    [o] = user_overlays(graph, build_tree(graph), {"delta": {"n1": -1.0, "n2": 1e6}})
    assert o["scale"] == "linear"


@pytest.mark.parametrize(("user", "words"), [
    ({"x": {"n999": 1.0}}, r"'n999' is neither a node id .* nor a module name of this graph"),
    ({"x": {f"nope{k}": 1.0 for k in range(8)}}, r"'nope0', .*'nope4' and 3 more is neither"),
    ({"x": {"n1": True}}, r"overlay 'x', 'n1': the value must be a finite number or None, got True"),
    ({"x": {"n1": math.nan}}, r"finite number or None, got nan"),
    ({"x": {"n1": "3"}}, r"finite number or None, got '3'"),
    ({"": {"n1": 1.0}}, r"an overlay's name must be non-empty text"),
    ({"x": [1.0]}, r"overlay 'x': expected \{node id or module name: value\}, got list"),
])
def test_a_malformed_overlay_says_what_and_where(user: dict, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        payload(module_graph(2), user=user)


def test_save_passes_overlays_into_the_html_file_and_refuses_them_for_a_picture(tmp_path: Path) -> None:
    path = save(module_graph(2), tmp_path / "x.html", overlays={"latency_ms": {"n1": 4.0}})
    text = path.read_text(encoding="utf-8")
    data = json.loads(gzip.decompress(base64.b64decode(re.search(r'id="gv-payload">([^<]*)<', text).group(1))))
    [o] = [o for o in data["overlays"] if o["key"] == "user:latency_ms"]
    assert o["node"][1] == 4.0
    with pytest.raises(UnsupportedFormatError, match="overlays are colourings of the HTML viewer only, not of 'dot'"):
        save(module_graph(2), tmp_path / "x.dot", overlays={"latency_ms": {"n1": 4.0}})
    with pytest.raises(ValueError, match="'n77' is neither a node id"):
        save(module_graph(2), tmp_path / "y.html", overlays={"latency_ms": {"n77": 4.0}})


@pytest.mark.browser
@pytest.mark.slow
def test_a_hostile_overlay_name_and_key_show_as_text_and_the_value_in_the_details(page, tmp_path: Path) -> None:  # noqa: ANN001
    graph = module_graph(2)
    name = HOSTILE[1]
    path = tmp_path / "o.html"
    path.write_text(viewer_html(graph, overlays={name: {"n1": 42.5, "blocks.0": 3.25}}), encoding="utf-8")
    open_viewer(page, path, "#open=0.1&sel=n1")
    menu = page.get_by_test_id("viewer-color")
    assert ("colour: " + name) in menu.locator("option").all_inner_texts()
    menu.select_option(f"user:{name}")
    assert name in page.get_by_test_id("viewer-legend").inner_text()
    page.locator("[data-node=n1]").click()
    details = page.get_by_test_id("viewer-details").inner_text()
    assert name in details and "42.5" in details
    assert page.evaluate("window.__pwned") is None and page.dialogs == [] and page.errors == []
    assert page.locator("img, [onerror]").count() == 0
