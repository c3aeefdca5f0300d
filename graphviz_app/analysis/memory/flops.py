"""The forward cost of each op, estimated from the shapes a graph records: what recomputing it would take."""

from __future__ import annotations

from collections import defaultdict

from ...model import EdgeKind, Graph, Node, NodeKind

__all__ = ["forward_flops"]


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _op_flops(op: Node, saved: dict[str, tuple[int, ...]]) -> int:
    """Floating-point operations of the op's forward: 2 x multiply-adds for matmuls, convolutions,
    attention and RNN layers (from the saved operands' shapes); one per output element otherwise."""
    out = _numel(op.tensor.shape) if op.tensor is not None else 0
    name = op.name
    if name in ("AddmmBackward0", "MmBackward0", "BmmBackward0", "BaddbmmBackward0"):
        first = saved.get("mat1") or saved.get("self") or saved.get("batch1")
        return 2 * out * first[-1] if first else out
    if name.startswith("ConvolutionBackward") and "weight" in saved:
        weight = saved["weight"]
        return 2 * out * (_numel(weight) // max(1, weight[0]))
    if "Attention" in name and "query" in saved and "key" in saved:
        q, k = saved["query"], saved["key"]
        return 4 * _numel(q) * k[-2] if len(k) >= 2 else out
    if name.startswith(("MkldnnRnnLayer", "CudnnRnn")):
        weights = [s for n, s in saved.items() if n.startswith("weight") and len(s) == 2]
        steps = out // max(1, weights[0][0] // 4) if weights else 0
        return 2 * steps * sum(_numel(w) for w in weights) if weights else out
    return out


def forward_flops(graph: Graph) -> dict[str, int]:
    """Op node id -> its forward's estimated floating-point operations.

    >>> from graphviz_app.model import Edge, EdgeKind, Graph, Node, NodeKind, TensorInfo
    >>> t = lambda shape: TensorInfo(None, shape, "float32", "cpu", 0, 0, True)
    >>> op, mat1 = Node("n0", NodeKind.OP, "AddmmBackward0", t((8, 4))), Node("n1", NodeKind.SAVED, "mat1", t((8, 16)))
    >>> g = Graph((op, mat1), (Edge("n1", "n0", EdgeKind.SAVED),))
    >>> forward_flops(g)  # 8 x 4 outputs, 16 multiply-adds each
    {'n0': 1024}
    """
    by_id = {n.id: n for n in graph.nodes}
    saved: dict[str, dict[str, tuple[int, ...]]] = defaultdict(dict)
    for e in graph.edges:
        if e.kind is EdgeKind.SAVED:
            s = by_id[e.src]
            if s.tensor is not None and not s.tensor.freed:
                saved[e.dst][s.name] = s.tensor.shape
    return {n.id: _op_flops(n, saved.get(n.id, {})) for n in graph.nodes if n.kind is NodeKind.OP}
