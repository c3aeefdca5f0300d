"""Graphs built by hand from the model, for what this machine cannot trace (GPUs)."""

from __future__ import annotations

from graphviz_app.model import Edge, Graph, Node, NodeKind, TensorInfo

__all__ = ["three_devices"]


def _info(device: str, name: str | None = None, values: tuple[float, ...] | None = None) -> TensorInfo:
    return TensorInfo(name, (2,), "float32", device, 2, 8, True, values, None if values is None else "s0")


def three_devices() -> Graph:
    """x on cpu -> copied to cuda:0 -> copied to cuda:1 -> added there -> output."""
    return Graph(
        nodes=(
            Node("n0", NodeKind.OUTPUT, "output", _info("cuda:1", "output", (2.0, 3.0))),
            Node("n1", NodeKind.OP, "AddBackward0", _info("cuda:1"), (("alpha", "1"),)),
            Node("n2", NodeKind.OP, "ToCopyBackward0", _info("cuda:1")),
            Node("n3", NodeKind.OP, "ToCopyBackward0", _info("cuda:0")),
            Node("n4", NodeKind.LEAF, "x", _info("cpu", "x", (1.0, 2.0))),
        ),
        edges=(
            Edge("n1", "n0"),
            Edge("n2", "n1"),
            Edge("n3", "n2"),
            Edge("n4", "n3"),
        ),
    )

