"""module_summary(): one row per module, in named_modules() order, with ops, saved memory and params."""

from __future__ import annotations

from mv_graphs import LAYER_PARTS, encoder_graph, tensor

from graphviz_app.analysis.module_summary import ModuleRow, module_summary
from graphviz_app.model import Edge, EdgeKind, Graph, ModuleInfo, Node, NodeKind, TensorInfo


def test_rows_follow_graph_modules_order_and_include_submodules() -> None:
    graph = encoder_graph(2)
    rows = list(graph.module_summary())
    assert [r.module for r in rows] == [m.name for m in graph.modules]
    layer = next(r for r in rows if r.module == "layers.1")
    assert layer == ModuleRow("layers.1", "TransformerEncoderLayer", len(LAYER_PARTS), 32 * len(LAYER_PARTS), 140, 560,
                              layer.peak_bytes)
    root = rows[0]
    assert (root.module, root.ops, root.params) == ("", 2 * len(LAYER_PARTS) + 1, 280)


def test_saved_bytes_count_each_storage_once_and_skip_freed_tensors() -> None:
    freed = TensorInfo(None, (100,), "float32", "cpu", 100, 400, False, storage="s9", freed=True)
    nodes = (
        Node("n0", NodeKind.OP, "MulBackward0", tensor(), module="a"),
        Node("n1", NodeKind.SAVED, "self", tensor(storage="s0")),
        Node("n2", NodeKind.SAVED, "other", tensor(storage="s0")),
        Node("n3", NodeKind.OP, "ExpBackward0", tensor(), module="b"),
        Node("n4", NodeKind.SAVED, "result", tensor(storage="s0")),  # the same storage, another module
        Node("n5", NodeKind.SAVED, "self", freed),  # released by backward: holds nothing
    )
    edges = tuple(Edge(s, d, EdgeKind.SAVED) for s, d in [("n1", "n0"), ("n2", "n0"), ("n4", "n3"), ("n5", "n3")])
    rows = {r.module: r for r in module_summary(Graph(nodes, edges))}
    assert (rows["a"].activation_bytes, rows["b"].activation_bytes) == (32, 32)
    assert rows[""].activation_bytes == 32  # shared between a and b: counted once for the parent


def test_the_table_prints_one_line_per_module_with_readable_numbers() -> None:
    text = str(encoder_graph(100).module_summary())
    lines = text.splitlines()
    assert lines[0].split() == ["module", "type", "ops", "activations", "at", "peak", "params", "param", "bytes"]
    assert lines[1].split() == ["(root)", "TransformerEncoder", "1,101", "34.4", "KiB", "92.3", "KiB", "14,000",
                                "54.7", "KiB"]
    assert len(lines) == 1 + len(encoder_graph(100).modules)


def test_modules_unknown_to_graph_modules_follow_with_their_parents() -> None:
    nodes = (Node("n0", NodeKind.OP, "AddBackward0", module="extra.inner"),)
    graph = Graph(nodes, (), modules=(ModuleInfo("", "Net", 3, 12),))
    assert [(r.module, r.type, r.ops) for r in module_summary(graph)] == [
        ("", "Net", 1), ("extra", "", 1), ("extra.inner", "", 1),
    ]


def test_a_graph_without_modules_says_how_to_get_them() -> None:
    summary = module_summary(Graph((Node("n0", NodeKind.OP, "AddBackward0"),), ()))
    assert len(summary) == 0
    assert "with record(model):" in str(summary) and "trace_model" in str(summary)


def test_saved_memory_of_a_graph_traced_without_saved_tensors_reads_not_traced() -> None:
    graph = encoder_graph(1, saved=False)
    assert str(graph.module_summary()).splitlines()[1].split()[3:5] == ["not", "traced"]
    assert not graph.module_summary().saved_traced


def test_a_weight_saved_for_backward_is_a_parameter_not_an_activation() -> None:
    """nn.Linear saves its input and its weight: only the input is memory the graph adds."""
    import torch
    from torch import nn

    from graphviz_app import trace_model

    model = nn.Sequential(nn.Linear(4, 8))
    graph = trace_model(model, torch.ones(2, 4))
    row = next(r for r in module_summary(graph) if r.module == "0")
    assert row.param_bytes == (4 * 8 + 8) * 4
    assert row.activation_bytes == 2 * 4 * 4  # the (2, 4) input; the weight counts under params
