"""Every colouring writes data as text: a saved graph whose ids, names, devices, modules, attributes and notes
are hostile lays out with each overlay (device, gradient, order, diff) into the same nodes, with no link or
file attribute."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from graphviz_app.drawing.diff_style import export_diff
from graphviz_app.drawing.dot_text import FORBIDDEN_ATTRS
from graphviz_app.drawing.renderer import export
from graphviz_app.model import Edge, GradInfo, Graph, ModuleInfo, Node, NodeKind, TensorInfo

EVIL = 'x\\" URL=<javascript:alert(1)> image=</etc/passwd> \\'


def _hostile() -> Graph:
    t = TensorInfo(EVIL, (2,), "float32", f"cuda:{EVIL}", 2, 8, True)
    g = GradInfo(2, float("nan"), 1.0, 0.5, nan=1)
    nodes = (
        Node(f"out{EVIL}", NodeKind.OUTPUT, f"output{EVIL}", t, module=""),
        Node(f"op:{EVIL}", NodeKind.OP, f"Mul{EVIL}", t, ((EVIL, EVIL),), module=EVIL, source=EVIL, grad=g,
             order=1, differentiates=f"out{EVIL}"),
        Node("legend", NodeKind.LEAF, "a leaf whose id is the legend's", t, module=EVIL, grad=g),
    )
    edges = (Edge(f"op:{EVIL}", f"out{EVIL}", grad=g), Edge("legend", f"op:{EVIL}"))
    return Graph(nodes, edges, notes=(EVIL,), modules=(ModuleInfo("", EVIL), ModuleInfo(EVIL, EVIL)),
                 nonfinite_origin=f"op:{EVIL}")


def _objects(dot: str) -> dict[str, Any]:
    run = subprocess.run(["dot", "-Tjson0"], input=dot, capture_output=True, text=True, timeout=120, check=True)
    return json.loads(run.stdout)


def _assert_safe(dot: str) -> dict[str, Any]:
    data = _objects(dot)
    for obj in [data, *data.get("objects", []), *data.get("edges", [])]:
        assert not {k.lower() for k in obj} & FORBIDDEN_ATTRS, obj
    return data


@pytest.mark.parametrize("color_by", ["device", "gradient", "order"])
def test_each_colouring_keeps_hostile_text_inside_its_labels(color_by: str) -> None:
    graph = _hostile()
    data = _assert_safe(export(graph, "dot", color_by=color_by).decode())
    names = {str(o["name"]) for o in data["objects"] if "nodes" not in o}
    # every node of the graph is one Graphviz node (ids kept whole: ':' is no port), plus the legend box
    assert len([n for n in names if not n.startswith("cluster_")]) == len(graph.nodes) + 1


def test_the_diff_drawing_keeps_hostile_text_inside_its_labels() -> None:
    graph = _hostile()
    other = Graph(graph.nodes[:2], graph.edges[:1], modules=graph.modules)
    _assert_safe(export_diff(graph, other, "dot").decode())
    svg = export_diff(graph, other, "svg").decode()
    assert "<a " not in svg and "xlink:href" not in svg and "<image" not in svg
