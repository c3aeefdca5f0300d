"""What the page draws of big graphs (layout budget), what the details panel says, and ?expand= links."""

from __future__ import annotations

import json

import pytest

from graphviz_app.analysis.collapse import collapse
from graphviz_app.analysis.nearest import nearest
from graphviz_app.errors import GraphvizAppError
from graphviz_app.model import Edge, EdgeKind, GradInfo, Graph, ModuleInfo, Node, NodeKind, TensorInfo
from graphviz_app.web.urlstate import PageState, from_query, to_query
from graphviz_app.web.worker.details import node_details
from graphviz_app.web.worker.view import plan


def chain(n: int, *, module: str | None = None) -> Graph:
    """output n0 <- op n1 <- ... <- op n(n-1): data flows from n(n-1) to n0."""
    nodes = [Node("n0", NodeKind.OUTPUT, "out")]
    nodes += [Node(f"n{i}", NodeKind.OP, f"Op{i}Backward0", module=module) for i in range(1, n)]
    return Graph(nodes=tuple(nodes), edges=tuple(Edge(f"n{i + 1}", f"n{i}") for i in range(n - 1)))


def test_nearest_keeps_the_output_end_and_counts_what_it_hides() -> None:
    part = nearest(chain(10), limit=4)
    assert [n.id for n in part.graph.nodes] == ["n0", "n1", "n2", "n3"]
    assert part.hidden == 6
    assert part.frontier == ("n3",)  # where the drawing stops: n4 feeds it
    assert all(e.src in {"n1", "n2", "n3"} for e in part.graph.edges)


def test_nearest_walks_breadth_first_so_every_input_of_the_output_stays() -> None:
    # out <- add <- (a, b, c); a <- deep chain
    nodes = (Node("o", NodeKind.OUTPUT, "out"), Node("add", NodeKind.OP, "AddBackward0"),
             *(Node(x, NodeKind.LEAF, x) for x in "abc"), Node("d1", NodeKind.OP, "D1"), Node("d2", NodeKind.OP, "D2"))
    edges = (Edge("add", "o"), Edge("a", "add"), Edge("b", "add"), Edge("c", "add"), Edge("d1", "a"), Edge("d2", "d1"))
    part = nearest(Graph(nodes=nodes, edges=edges), limit=5)
    assert {n.id for n in part.graph.nodes} == {"o", "add", "a", "b", "c"}
    assert part.hidden == 2


def test_nearest_of_a_small_graph_is_the_graph() -> None:
    g = chain(5)
    assert nearest(g, limit=5).graph is g


def test_nearest_refuses_a_limit_below_one() -> None:
    with pytest.raises(GraphvizAppError, match="limit must be at least 1 node, got 0"):
        nearest(chain(3), limit=0)


def test_a_graph_within_the_budget_is_drawn_whole() -> None:
    view = plan(chain(200), budget=1500)
    assert view.mode == "full" and len(view.graph.nodes) == 200 and view.note == ""


def test_a_flat_graph_over_the_budget_shows_the_part_nearest_the_output_with_a_note() -> None:
    view = plan(chain(3000), budget=1500)
    assert view.mode == "partial"
    assert len(view.graph.nodes) == 1500 and view.graph.nodes[0].kind is NodeKind.OUTPUT
    assert "Showing the 1,500 nodes nearest the output of 3,000: 1,500 farther back are hidden" in view.note
    assert "lower the node limit" in view.note


def fake_collapse(graph: Graph, *, depth: int | None = None, roll: bool = False,
                  expanded: frozenset[str] = frozenset()) -> Graph:
    """Stands in for graphviz_app.analysis.collapse: one MODULE node per module deeper than `depth`."""
    keep, boxes = [], {}
    for n in graph.nodes:
        parts = (n.module or "").split(".") if n.module else []
        cut = depth if depth is not None else len(parts)
        # an expanded module shows one more level
        while cut < len(parts) and ".".join(parts[: cut + 1]) in expanded:
            cut += 1
        if len(parts) > cut:
            name = ".".join(parts[: cut + 1])
            boxes.setdefault(name, Node(f"m_{name}", NodeKind.MODULE, name, module=name))
        else:
            keep.append(n)
    ids = {n.id for n in keep}
    edges = tuple(e for e in graph.edges if e.src in ids and e.dst in ids)  # box edges left out
    return Graph(nodes=(*keep, *boxes.values()), edges=edges, modules=graph.modules)


def layered(layers: int, ops: int) -> Graph:
    nodes = [Node("out", NodeKind.OUTPUT, "out")]
    nodes += [Node(f"l{i}o{j}", NodeKind.OP, "MmBackward0", module=f"layers.{i}.ff")
              for i in range(layers) for j in range(ops)]
    modules = (ModuleInfo("", "Net"), ModuleInfo("layers", "ModuleList"),
               *(ModuleInfo(f"layers.{i}", "Block") for i in range(layers)),
               *(ModuleInfo(f"layers.{i}.ff", "Linear", params=10, param_bytes=40) for i in range(layers)))
    return Graph(nodes=tuple(nodes), edges=(), modules=modules)


def test_a_graph_with_modules_opens_at_the_deepest_readable_level_and_a_click_opens_one_box() -> None:
    g = layered(6, 100)  # 601 nodes; layer boxes: 7 nodes; ff boxes: 7 nodes
    view = plan(g, budget=1500, readable=250, collapse=fake_collapse)
    assert view.mode == "modules" and view.depth == 2
    assert len(view.graph.nodes) == 7
    assert "Click a box to open it" in view.note
    opened = plan(g, budget=1500, readable=250, expanded=frozenset({"layers.0.ff"}), collapse=fake_collapse)
    assert len(opened.graph.nodes) == 7 - 1 + 100
    assert opened.expanded == ("layers.0.ff",)


def test_a_module_view_still_over_the_budget_shows_the_part_nearest_the_output() -> None:
    g = layered(2, 10)
    loose = tuple(Node(f"r{i}", NodeKind.OP, "AddBackward0", module="") for i in range(400))  # the root's own ops
    g = Graph(nodes=g.nodes + loose, edges=tuple(Edge(n.id, "out") for n in loose), modules=g.modules)
    view = plan(g, budget=300, readable=250, collapse=fake_collapse)
    assert view.mode == "modules" and len(view.graph.nodes) == 300
    assert "Only the 300 drawn nodes nearest the output are shown" in view.note


def test_a_small_graph_with_modules_is_drawn_whole() -> None:
    view = plan(layered(2, 3), budget=1500, readable=250, collapse=fake_collapse)
    assert view.mode == "full" and len(view.graph.nodes) == 7


def test_an_opened_box_that_would_pass_the_budget_stays_closed() -> None:
    g = layered(6, 400)
    view = plan(g, budget=300, readable=250, expanded=frozenset({"layers.0.ff"}), collapse=fake_collapse)
    assert view.mode == "modules" and len(view.graph.nodes) == 7
    assert view.expanded == ()
    assert "Opening layers.0.ff would draw 406 nodes, more than the 300 the page lays out" in view.note


def test_details_hold_everything_the_model_knows_about_a_node() -> None:
    t = TensorInfo(name="x", shape=(3,), dtype="float32", device="cpu", numel=3, bytes=12,
                   requires_grad=True, values=(0.0, 1.0, 2.0))
    saved = TensorInfo(name=None, shape=(3,), dtype="float32", device="cpu", numel=3, bytes=12, requires_grad=False)
    g = Graph(
        nodes=(Node("n0", NodeKind.OP, "PowBackward0", tensor=t, attrs=(("exponent", "2"),), module="layers.0",
                    source="model.py:12 in forward",
                    grad=GradInfo(numel=3, norm=1.5, max_abs=1.0, mean_abs=0.5, nan=1, zero_fraction=1 / 3)),
               Node("n1", NodeKind.SAVED, "self", tensor=saved)),
        edges=(Edge("n1", "n0", EdgeKind.SAVED),),
        modules=(ModuleInfo("layers.0", "Linear", params=12, param_bytes=48),),
    )
    d = node_details(g)["n0"]
    rows = dict(map(tuple, d["rows"]))
    assert (d["title"], rows["shape"], rows["dtype"], rows["device"]) == ("PowBackward0", "(3,)", "float32", "cpu")
    assert rows["values"] == "0.0, 1.0, 2.0" and rows["size"] == "3 elements, 12 B"
    assert rows["attribute exponent"] == "2"
    assert rows["saved"] == "self: (3,) float32 12 B"
    assert rows["module"] == "layers.0 (Linear)" and rows["source"] == "model.py:12 in forward"
    assert rows["gradient norm"] == "1.5" and rows["gradient non-finite"] == "1 nan, 0 inf of 3"
    assert "powbackward0" in d["search"] and "layers.0" in d["search"] and "(3,)" in d["search"]
    json.dumps(node_details(g))  # the viewer receives it as JSON


def test_a_module_box_tells_the_viewer_which_module_it_opens() -> None:
    g = Graph(nodes=(Node("m0", NodeKind.MODULE, "layers.3 (Block)", attrs=(("ops", "12"),), module="layers.3"),),
              edges=())
    d = node_details(g)["m0"]
    assert d["module"] == "layers.3"
    assert ["ops", "12"] in d["rows"]  # a box's facts, not "attribute ops"


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


def test_with_the_model_views_collapse_a_click_opens_one_box_and_a_link_reopens_it() -> None:
    g = layered_chain(6)
    view = plan(g, budget=1500, readable=250)
    boxes = [n for n in view.graph.nodes if n.kind is NodeKind.MODULE]
    assert view.mode == "modules" and len(boxes) == 12  # layers.N.attn and layers.N.ff
    assert {d["module"] for d in node_details(view.graph).values() if "module" in d} == {n.module for n in boxes}
    opened = plan(g, budget=1500, readable=250, expanded=frozenset({"layers.2.attn"}))
    assert len(opened.graph.nodes) == len(view.graph.nodes) - 1 + 40
    state, _ = from_query(to_query(PageState(expanded=opened.expanded)))
    again = plan(g, budget=1500, readable=250, expanded=frozenset(state.expanded))
    assert again.graph == opened.graph
    assert collapse(g, depth=2) == view.graph


def layered_chain(layers: int) -> Graph:
    """An encoder-shaped chain: each layer's attn and ff are 40 ops each."""
    nodes, edges, prev = [Node("out", NodeKind.OUTPUT, "out")], [], "out"
    modules = [ModuleInfo("", "Encoder"), ModuleInfo("layers", "ModuleList")]
    for i in range(layers):
        modules.append(ModuleInfo(f"layers.{i}", "Layer"))
        for sub in ("attn", "ff"):
            modules.append(ModuleInfo(f"layers.{i}.{sub}", "Linear", params=100, param_bytes=400))
            for _ in range(40):
                nid = f"n{len(nodes)}"
                nodes.append(Node(nid, NodeKind.OP, "MmBackward0", module=f"layers.{i}.{sub}"))
                edges.append(Edge(nid, prev))
                prev = nid
    return Graph(nodes=tuple(nodes), edges=tuple(edges), modules=tuple(modules))
