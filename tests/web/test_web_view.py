"""What the page sends its viewer: the whole graph, opened to the sidebar's depth; ?view= and ?expand= links."""

from __future__ import annotations

import pytest
from web_support import decode_viewer, opened_modules

from graphviz_app.jobs.viewing import viewer_data
from graphviz_app.model import Edge, Graph, ModuleInfo, Node, NodeKind
from graphviz_app.web.urlstate import MAX_VIEW_CHARS, Options, PageState, from_query, to_query


def chain(n: int, *, module: str | None = None) -> Graph:
    """output n0 <- op n1 <- ... <- op n(n-1): data flows from n(n-1) to n0."""
    nodes = [Node("n0", NodeKind.OUTPUT, "out")]
    nodes += [Node(f"n{i}", NodeKind.OP, f"Op{i}Backward0", module=module) for i in range(1, n)]
    return Graph(nodes=tuple(nodes), edges=tuple(Edge(f"n{i + 1}", f"n{i}") for i in range(n - 1)))


def test_a_link_carries_the_viewers_view_and_it_replaces_expand() -> None:
    view = "open=0.1.4&inst=4:2&sel=n17&color=gradient"
    state, problems = from_query({"view": "#" + view, "expand": "layers.0"})
    assert state.view == view and problems == []
    query = to_query(state)
    assert query["view"] == view and "expand" not in query  # the view holds the boxes expand opened
    assert from_query(query)[0] == state.__class__(view=view)


def test_a_view_too_long_to_come_from_the_page_is_ignored_with_a_reason() -> None:
    state, problems = from_query({"view": "open=" + "1." * MAX_VIEW_CHARS})
    assert state.view == ""
    assert problems == [f"ignored ?view= ({2 * MAX_VIEW_CHARS + 5:,} characters): a view holds at most 4,000"]


def test_the_viewer_gets_the_whole_graph_however_big() -> None:
    data = decode_viewer(viewer_data(chain(20_000), Options(), title="program"))
    assert len(data["graph"]["nodes"]["kind"]) == 20_000  # no layout budget: the browser lays out what is open
    assert len(data["open"]) < 10  # the chain opens folded, not as 20,000 nodes


@pytest.mark.parametrize(("depth", "roll", "opened"), [
    (1, True, {""}),
    (2, True, {"", "layers"}),
    (3, False, {"", "layers", *(f"layers.{i}" for i in range(6))}),
])
def test_the_sidebar_depth_opens_the_module_boxes_above_it(depth: int, roll: bool, opened: set[str]) -> None:
    data = decode_viewer(viewer_data(layered_chain(6), Options(module_depth=depth, roll=roll), title="program"))
    assert opened_modules(data) == opened
    rolled = [label for label in data["tree"]["label"] if label.endswith("×6")]
    assert rolled == (["layers.0–5: Layer ×6"] if roll else [])


def test_depth_0_lets_the_viewer_open_the_deepest_readable_level() -> None:
    data = decode_viewer(viewer_data(layered_chain(6), Options(module_depth=0, roll=False), title="program"))
    # 6 layers of 2 boxes of 40 ops: the layers open, then 40-op boxes while about 120 items show, not all 12.
    opened = opened_modules(data)
    assert {"", "layers", *(f"layers.{i}" for i in range(6))} <= opened
    assert 0 < len(opened - {"", "layers", *(f"layers.{i}" for i in range(6))}) < 12


@pytest.mark.parametrize(("raw", "expanded"), [
    ("layers.0", ("layers.0",)),
    ("layers.1,layers.0", ("layers.0", "layers.1")),
    (" a , ,a", ("a",)),
    ("", ()),
])
def test_a_link_names_the_opened_module_boxes(raw: str, expanded: tuple[str, ...]) -> None:
    state, problems = from_query({"expand": raw})
    assert state.expanded == expanded and problems == []
    back = to_query(state)
    assert back.get("expand", "") == ",".join(expanded)


def test_a_link_without_opened_boxes_has_no_expand_parameter() -> None:
    assert "expand" not in to_query(PageState())


def layered_chain(layers: int) -> Graph:
    """An encoder-shaped chain: layers.0 feeds layers.1 and so on; each layer's attn and ff are 40 ops each."""
    nodes, edges, prev = [Node("out", NodeKind.OUTPUT, "out")], [], "out"
    modules = [ModuleInfo("", "Encoder"), ModuleInfo("layers", "ModuleList")]
    for i in range(layers):
        modules.append(ModuleInfo(f"layers.{i}", "Layer"))
        modules += [ModuleInfo(f"layers.{i}.{sub}", "Linear", params=100, param_bytes=400) for sub in ("attn", "ff")]
    for i in reversed(range(layers)):  # walked from the output: the last layer first
        for sub in ("ff", "attn"):
            for _ in range(40):
                nid = f"n{len(nodes)}"
                nodes.append(Node(nid, NodeKind.OP, "MmBackward0", module=f"layers.{i}.{sub}"))
                edges.append(Edge(nid, prev))
                prev = nid
    return Graph(nodes=tuple(nodes), edges=tuple(edges), modules=tuple(modules))
