"""A saved graph whose compiled regions list thousands of ops on both sides of one edge opens within a stated
bound: the regions adding too many edges stay boxes with a note, in every export and in the CLI's "wrote" line."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest

from graphviz_app.analysis.regions import MAX_REGION_EDGES, border_edge_count, region_names, show_regions
from graphviz_app.cli.commands import main
from graphviz_app.drawing.renderer import export
from graphviz_app.model import CompiledRegion, Edge, Graph, Node, NodeKind


def _region(node: str, index: int, ops: int) -> CompiledRegion:
    """A region of `ops` ops, every one of them computing input 0's gradient and receiving output 0's."""
    name = f"[compiled region {index}]"
    nodes = tuple(Node(f"{node}/{i}", NodeKind.OP, "aten.mul.Tensor", module=name) for i in range(ops))
    pairs = tuple((0, n.id) for n in nodes)
    return CompiledRegion(node, name, nodes, (), inputs=pairs, outputs=pairs)


def bomb(ops: int = 3000) -> Graph:
    """Two regions of `ops` ops joined by one edge: opened naively, ops * ops edges."""
    nodes = (Node("n0", NodeKind.OUTPUT, "out"), Node("n1", NodeKind.OP, "CompiledFunctionBackward"),
             Node("n2", NodeKind.OP, "CompiledFunctionBackward"))
    return Graph(nodes, (Edge("n1", "n0"), Edge("n2", "n1")), regions=(_region("n1", 1, ops), _region("n2", 2, ops)))


def test_the_fan_out_is_counted_without_building_it() -> None:
    graph = bomb()
    counts = border_edge_count(graph.edges, {r.node: r for r in graph.regions})
    assert counts == {"n1": 3000 + 3000 * 3000, "n2": 3000 * 3000}


def test_opening_the_bomb_is_bounded_in_edges_and_memory() -> None:
    graph = bomb()
    tracemalloc.start()
    try:
        shown = show_regions(graph, expanded=region_names(graph))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(shown.edges) <= MAX_REGION_EDGES
    assert peak < 100 * 2**20, f"opening took {peak / 2**20:.0f} MiB"
    boxes = [n for n in shown.nodes if n.kind is NodeKind.MODULE]
    assert len(boxes) == 1 and ("not opened", f"it would add 9,003,000 edges; open regions may add "
                                f"{MAX_REGION_EDGES:,}") in boxes[0].attrs
    assert any("[compiled region 1] is drawn closed: opening it would add 9,003,000 edges" in n for n in shown.notes)
    # The other region still opens: its 3,000 ops are drawn, each fed by the closed box.
    assert sum(n.id.startswith("n2/") for n in shown.nodes) == 3000


def test_small_regions_still_open_in_full() -> None:
    graph = bomb(ops=30)
    shown = show_regions(graph, expanded=region_names(graph))
    assert not [n for n in shown.nodes if n.kind is NodeKind.MODULE]
    assert len(shown.edges) == 30 * 30 + 30  # the join, then each op of region 1 to the output
    assert not shown.notes


@pytest.mark.parametrize("fmt", ["html", "model-explorer"])
def test_whole_graph_exports_of_the_bomb_are_bounded(fmt: str) -> None:
    data = export(bomb(), fmt)
    assert len(data) < 20 * 2**20  # 9,000,000 edges would be hundreds of MB
    if fmt == "model-explorer":
        edges = sum(len(n.get("incomingEdges", [])) for g in json.loads(data)["graphs"] for n in g["nodes"])
        assert edges <= MAX_REGION_EDGES


def test_the_cli_wrote_line_counts_what_was_drawn(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    saved = tmp_path / "bomb.json"
    saved.write_text(bomb().to_json(), encoding="utf-8")
    assert main(["render", str(saved), "-o", str(tmp_path / "bomb.html")]) == 0
    out, err = capsys.readouterr()
    assert "is drawn closed: opening it would add 9,003,000 edges" in err
    shown = show_regions(bomb(), expanded=region_names(bomb()))
    assert f"drawn as {len(shown.nodes):,} nodes, {len(shown.edges):,} edges" in out
