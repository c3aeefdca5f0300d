"""Hand-built recorded graphs for the model-view tests: no torch needed."""

from __future__ import annotations

from graphviz_app.model import Edge, EdgeKind, Graph, ModuleInfo, Node, NodeKind, TensorInfo

__all__ = ["LAYER_PARTS", "encoder_graph", "tensor"]

# One encoder layer, in data-flow order: (submodule, op) pairs; "" is the layer itself.
LAYER_PARTS = (
    ("self_attn", "AddmmBackward0"),
    ("self_attn", "SoftmaxBackward0"),
    ("self_attn", "BmmBackward0"),
    ("dropout1", "NativeDropoutBackward0"),
    ("", "AddBackward0"),
    ("norm1", "NativeLayerNormBackward0"),
    ("linear1", "AddmmBackward0"),
    ("", "ReluBackward0"),
    ("linear2", "AddmmBackward0"),
    ("", "AddBackward0"),
    ("norm2", "NativeLayerNormBackward0"),
)
_TYPES = {
    "self_attn": "MultiheadAttention", "dropout1": "Dropout", "norm1": "LayerNorm",
    "linear1": "Linear", "linear2": "Linear", "norm2": "LayerNorm",
}
_PARAMS = {"self_attn": 48, "norm1": 8, "linear1": 40, "linear2": 36, "norm2": 8}


def tensor(shape: tuple[int, ...] = (2, 4), *, storage: str | None = None, name: str | None = None) -> TensorInfo:
    numel = 1
    for s in shape:
        numel *= s
    return TensorInfo(name, shape, "float32", "cpu", numel, 4 * numel, False, storage=storage)


def encoder_graph(layers: int = 100, *, saved: bool = True) -> Graph:
    """A `TransformerEncoder`-shaped graph: input -> layers.0 ... layers.{n-1} -> mean -> output.

    Each layer is LAYER_PARTS chained, plus a weight leaf per module with
    parameters and a saved input per op; layers are modules `layers.i`.
    """
    nodes: list[Node] = [Node("n0", NodeKind.OUTPUT, "output", tensor(()))]
    edges: list[Edge] = []
    nodes.append(Node("n1", NodeKind.OP, "MeanBackward0", tensor(()), module=""))
    edges.append(Edge("n1", "n0"))
    last = "n1"
    counter = [2]

    def new_id() -> str:
        counter[0] += 1
        return f"n{counter[0] - 1}"

    # Built from the output backwards, as the tracer walks, so ids follow walk order.
    for i in reversed(range(layers)):
        for part, op in reversed(LAYER_PARTS):
            module = f"layers.{i}" + (f".{part}" if part else "")
            op_id = new_id()
            nodes.append(Node(op_id, NodeKind.OP, op, tensor(), module=module))
            edges.append(Edge(op_id, last, slot=0))
            if part in _PARAMS:
                leaf_id = new_id()
                nodes.append(Node(leaf_id, NodeKind.LEAF, f"{module}.weight", tensor((_PARAMS[part],)), module=module))
                edges.append(Edge(leaf_id, op_id, slot=1))
            if saved:
                saved_id = new_id()
                nodes.append(Node(saved_id, NodeKind.SAVED, "self", tensor(storage=f"s{op_id}")))
                edges.append(Edge(saved_id, op_id, EdgeKind.SAVED))
            last = op_id
    leaf_id = new_id()
    nodes.append(Node(leaf_id, NodeKind.LEAF, "x", tensor()))
    edges.append(Edge(leaf_id, last))
    modules = [ModuleInfo("", "TransformerEncoder", layers * 140, layers * 560),
               ModuleInfo("layers", "ModuleList", layers * 140, layers * 560)]
    for i in range(layers):
        modules.append(ModuleInfo(f"layers.{i}", "TransformerEncoderLayer", 140, 560))
        for part, kind in _TYPES.items():
            p = _PARAMS.get(part, 0)
            modules.append(ModuleInfo(f"layers.{i}.{part}", kind, p, 4 * p))
    return Graph(tuple(nodes), tuple(edges), modules=tuple(modules))
