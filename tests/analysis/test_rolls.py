"""Rolled runs of sibling modules, as public API shared by collapse and the viewer's box tree."""

from __future__ import annotations

import pytest

from graphviz_app.analysis.collapse import collapse
from graphviz_app.analysis.module_tree import node_modules
from graphviz_app.analysis.rolls import ModuleTree, run_title
from graphviz_app.model import Edge, Graph, ModuleInfo, Node, NodeKind


def blocks(names: list[str], *, op_of_last: str = "MulBackward0") -> Graph:
    """One op per module, each module feeding the next and the last feeding the output."""
    last = len(names)
    nodes = (Node("n0", NodeKind.OUTPUT, "out"),
             *(Node(f"n{i}", NodeKind.OP, op_of_last if i == last else "MulBackward0", module=names[i - 1])
               for i in range(1, last + 1)))
    edges = (*(Edge(f"n{i}", f"n{i + 1}") for i in range(1, last)), Edge(f"n{last}", "n0"))
    return Graph(nodes=nodes, edges=edges, modules=tuple(ModuleInfo(n, "Block", 0, 0) for n in names))


def test_identical_blocks_feeding_each_other_are_one_run() -> None:
    graph = blocks(["layers.0", "layers.1", "layers.2"])
    tree = ModuleTree(graph, node_modules(graph))
    assert tree.runs("layers") == [["layers.0", "layers.1", "layers.2"]]
    assert tree.runs("layers", frozenset({"layers.1"})) == [["layers.0"], ["layers.1"], ["layers.2"]]
    assert [n.name for n in collapse(graph, roll=True).nodes] == ["out", "layers.0–2: Block ×3"]


def test_a_block_with_other_insides_starts_a_run_of_its_own() -> None:
    graph = blocks(["layers.0", "layers.1", "layers.2"], op_of_last="AddBackward0")
    assert ModuleTree(graph, node_modules(graph)).runs("layers") == [["layers.0", "layers.1"], ["layers.2"]]


@pytest.mark.parametrize(("unit", "title"), [
    (["layers.3"], ("layers.3", "layers.3")),
    (["layers.0", "layers.1"], ("layers.0–1", "layers.0–1")),
    (["a.x", "a.y", "a.z", "a.w"], ("a.x … a.w", "a.x, a.y, a.z, a.w")),
    (["a.²", "a.³"], ("a.², a.³", "a.², a.³")),  # digits int() cannot read are names, not a range
    (["a.٣", "a.٤"], ("a.٣, a.٤", "a.٣, a.٤")),
])
def test_a_run_title_reads_a_numbered_range_only_from_ascii_digits(unit: list[str], title: tuple[str, str]) -> None:
    assert run_title(unit) == title
