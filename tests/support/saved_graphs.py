"""A small saved graph holding every kind of field (tensor, gradient, module, region), for the schema tests."""

from __future__ import annotations

from graphviz_app.model import Edge, GradInfo, Graph, ModuleInfo, Node, NodeKind, TensorInfo
from graphviz_app.model.regions import CompiledRegion

__all__ = ["every_field_graph"]


def every_field_graph() -> Graph:
    """Three nodes, two edges (one with a gradient), two modules, a note and a compiled region."""
    t = TensorInfo("x", (2, 3), "float32", "cpu", 6, 24, True, storage="s0")
    g = GradInfo(6, 1.5, 1.0, 0.25)
    nodes = (
        Node("n0", NodeKind.OUTPUT, "output", t, module=""),
        Node("n1", NodeKind.OP, "MulBackward0", t, (("other", "2"),), module="fc", source="m.py:3", grad=g),
        Node("n2", NodeKind.LEAF, "fc.weight", t, module="fc"),
    )
    edges = (Edge("n1", "n0"), Edge("n2", "n1", grad=g))
    region = CompiledRegion("n1", "[compiled region 1]", (Node("n1/0", NodeKind.OP, "mul"),), (),
                            inputs=((0, "n1/0"),))
    return Graph(nodes, edges, notes=("a note",), modules=(ModuleInfo("", "Net"), ModuleInfo("fc", "Linear", 6, 24)),
                 regions=(region,))
