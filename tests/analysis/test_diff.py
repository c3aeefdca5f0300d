"""diff(a, b): two graphs aligned by module path, op and position; drawn by change; the CLI and the assertion."""

from __future__ import annotations

import base64
import gzip
import json
import re
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from graphviz_app import Graph, assert_same_graph, diff, record, save, trace, trace_model
from graphviz_app.analysis.diff_view import diff_view
from graphviz_app.cli.commands import main
from graphviz_app.drawing.diff_style import STATUS_CODE, STATUS_LOOK, export_diff, render_diff
from graphviz_app.errors import GraphDiffError, UnsupportedFormatError
from graphviz_app.model import NodeKind


class Block(nn.Module):
    def __init__(self, width: int, *, checkpointed: bool = False) -> None:
        super().__init__()
        self.l1 = nn.Linear(width, 2 * width)
        self.l2 = nn.Linear(2 * width, width)
        self.checkpointed = checkpointed

    def inner(self, x: torch.Tensor) -> torch.Tensor:
        return self.l2(torch.relu(self.l1(x)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return checkpoint(self.inner, x, use_reentrant=False) if self.checkpointed else self.inner(x)


class Net(nn.Module):
    def __init__(self, width: int = 16, *, checkpointed: bool = False) -> None:
        super().__init__()
        self.block = Block(width, checkpointed=checkpointed)
        self.head = nn.Linear(width, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.tanh(self.block(x))).sum()


def _net_graph(**options: bool) -> Graph:
    torch.manual_seed(0)
    return trace_model(Net(**options), torch.randn(32, 16))


def test_a_model_against_itself_is_empty() -> None:
    a, b = _net_graph(), _net_graph()
    found = diff(a, b)
    assert found.empty and not found.structural and str(found) == "the graphs are the same"
    assert len(found.matched) == len(a.nodes)
    assert all(m.delta == 0 for m in found.modules)
    assert_same_graph(a, b)


def test_a_copy_with_one_more_layer_differs_by_exactly_that_layers_nodes() -> None:
    torch.manual_seed(0)
    short = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    longer = nn.Sequential(*short, nn.Tanh(), nn.Linear(2, 2))
    x = torch.randn(3, 4)
    a, b = trace_model(short, x), trace_model(longer, x)
    found = diff(a, b)
    assert found.only_a == ()
    new_modules = {"3", "4"}
    layer_nodes = {n.id for n in b.nodes if n.module in new_modules}
    owned = {e.src for e in b.edges if e.kind.value == "saved" and e.dst in layer_nodes}
    assert {n.id for n in found.only_b} == layer_nodes | owned
    assert {n.name for n in found.only_b if n.kind is NodeKind.LEAF} == {"4.weight", "4.bias"}
    assert found.structural and not found.changes
    rows = {m.module: m for m in found.modules}
    assert rows["4"].ops_before == 0 and rows["4"].ops_after == 2 and rows["0"].delta == 0


def test_float32_against_bfloat16_autocast_shows_the_saved_bytes_change_per_module() -> None:
    torch.manual_seed(0)
    model, x = Net(64), torch.randn(256, 64)
    with record(model):
        full = trace(model(x), model)
    with record(model), torch.autocast("cpu", dtype=torch.bfloat16):
        half = trace(model(x), model)
    found = diff(full, half)
    rows = {m.module: m for m in found.modules}
    assert rows["block.l2"].bytes_after < rows["block.l2"].bytes_before  # its activations are bfloat16 now
    assert rows["block"].delta < 0 and rows["(root)"].delta < 0
    assert {c.after for c in found.changes if c.what == "dtype"} == {"bfloat16"}
    assert any(c.what == "saved_bytes" for c in found.changes)
    assert any(n.name == "ToCopyBackward0" for n in found.only_b)  # autocast's casts
    table = found.module_table()
    assert "block.l2" in table and "bytes before" in table and "-" in table


def test_a_checkpointed_block_against_the_plain_one_shows_its_saved_tensors_gone() -> None:
    plain, kept = _net_graph(), _net_graph(checkpointed=True)
    found = diff(plain, kept)
    assert not found.structural  # the same ops
    gone = [c for c in found.changes if c.what == "saved_bytes"]
    assert gone and all(c.after.startswith("not held") for c in gone)
    assert {c.module for c in gone} == {None}  # saved tensors carry their op's module through the key
    assert all(c.key.startswith("block") for c in gone)
    rows = {m.module: m for m in found.modules}
    assert rows["block"].bytes_before > 0 and rows["block"].bytes_after == 0
    assert rows["head"].delta == 0
    assert any("packed by a saved-tensor hook" in note for note in kept.notes)


def test_gradient_statistics_that_changed_are_reported() -> None:
    def graph(scale: float) -> Graph:
        x = torch.arange(3.0, requires_grad=True)
        return trace((x * scale).sum(), {"x": x}, gradients=True)

    found = diff(graph(1.0), graph(3.0))
    assert not found.structural
    assert {c.name for c in found.changes if c.what == "gradients"} >= {"x"}
    with pytest.raises(GraphDiffError, match="gradients"):
        assert_same_graph(graph(1.0), graph(3.0))
    assert_same_graph(graph(1.0), graph(3.0), ignore=["gradients"])


def test_assert_same_graph_says_what_differs_and_ignores_what_it_is_told() -> None:
    a, b = _net_graph(), _net_graph(checkpointed=True)
    with pytest.raises(GraphDiffError, match=r"the graphs differ \(4 saved_bytes; ignored: nothing\)") as caught:
        assert_same_graph(a, b)
    assert isinstance(caught.value, AssertionError) and caught.value.diff.counts()["saved_bytes"] == 4
    assert_same_graph(a, b, ignore={"saved_bytes"})
    with pytest.raises(ValueError, match="ignore names \\['bytes'\\], expected some of nodes, edges"):
        assert_same_graph(a, b, ignore=["bytes"])


def test_the_drawing_colours_each_change_and_the_json_carries_an_overlay() -> None:
    torch.manual_seed(0)
    short = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    x = torch.randn(3, 4)
    a = trace_model(nn.Sequential(*short, nn.Tanh()), x)
    b = trace_model(nn.Sequential(*short, nn.Sigmoid()), x)
    dot = render_diff(a, b).source
    for status in ("added", "removed"):
        assert STATUS_LOOK[status][0] in dot
    assert "SigmoidBackward0" in dot and "TanhBackward0" in dot and "a/n" in dot
    data = json.loads(export_diff(a, b, "json"))
    again = Graph.from_dict(data)
    statuses = data["diff"]["nodes"]
    assert {again.node(i).name for i, s in statuses.items() if s == "removed"} >= {"TanhBackward0"}
    assert {again.node(i).name for i, s in statuses.items() if s == "added"} >= {"SigmoidBackward0"}
    assert data["diff"]["structural"] is True
    view = diff_view(a, b)
    assert {view.node_status(n.id) for n in view.graph.nodes} == {"same", "added", "removed"}
    with pytest.raises(UnsupportedFormatError, match="cannot write a diff as 'gif'"):
        export_diff(a, b, "gif")


def test_the_cli_exits_1_only_when_the_structure_differs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plain, kept = tmp_path / "plain.json", tmp_path / "kept.json"
    save(_net_graph(), plain)
    save(_net_graph(checkpointed=True), kept)
    torch.manual_seed(0)
    save(trace_model(nn.Sequential(nn.Linear(16, 1)), torch.randn(2, 16)), tmp_path / "other.json")
    assert main(["diff", str(plain), str(plain)]) == 0
    assert "the graphs are the same" in capsys.readouterr().out
    assert main(["diff", str(plain), str(kept), "-o", str(tmp_path / "d.svg")]) == 0  # bytes only
    out = capsys.readouterr().out
    assert "4 saved-bytes" in out and "block" in out and (tmp_path / "d.svg").read_text().startswith("<?xml")
    assert main(["diff", str(plain), str(tmp_path / "other.json")]) == 1
    assert main(["diff", str(plain), str(tmp_path / "other.json"), "-o", str(tmp_path / "d.html")]) == 1
    assert "GraphvizAppViewer.mountCompare" in (tmp_path / "d.html").read_text()  # the two graphs in synced panes
    assert main(["diff", str(plain), str(kept), "-o", str(tmp_path / "d.json")]) == 0
    block = json.loads((tmp_path / "d.json").read_text())["diff"]
    assert block["structural"] is False and block["counts"]["saved_bytes"] == 4
    capsys.readouterr()
    assert main(["diff", str(plain), str(tmp_path / "missing.json")]) == 2
    assert "cannot read" in capsys.readouterr().err
    assert main(["diff", str(plain), str(kept), "-o", str(tmp_path / "d.gif")]) == 2
    assert "cannot write a diff as 'gif'" in capsys.readouterr().err


def test_the_diff_opens_in_the_viewer_coloured_by_change(tmp_path: Path) -> None:
    torch.manual_seed(0)
    short = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    x = torch.randn(3, 4)
    a = trace_model(nn.Sequential(*short, nn.Tanh()), x)
    b = trace_model(nn.Sequential(*short, nn.Sigmoid()), x)
    page = export_diff(a, b, "html").decode()
    assert page.startswith("<!DOCTYPE html>") and "GraphvizAppViewer.mount" in page
    packed = re.search(r'<script type="application/octet-stream" id="gv-payload">([^<]*)</script>', page)
    assert packed is not None
    data = json.loads(gzip.decompress(base64.b64decode(packed.group(1))))  # the payload, gzipped in base64
    graph = Graph.from_dict(data["graph"])
    colouring = next(o for o in data["overlays"] if o["key"] == "diff")
    by_name = {graph.nodes[i].name: code for i, code in enumerate(colouring["node"])}
    assert by_name["SigmoidBackward0"] == STATUS_CODE["added"] and by_name["TanhBackward0"] == STATUS_CODE["removed"]
    assert colouring["group"][0] == max(colouring["node"])  # the whole graph's box shows that something changed
    assert data["diff"]["structural"] is True


def test_tracing_a_checkpointed_block_does_not_run_its_forward_again() -> None:
    calls = []

    def inner(x: torch.Tensor) -> torch.Tensor:
        calls.append(1)
        return torch.relu(x * 2).exp()

    x = torch.randn(4, requires_grad=True)
    y = checkpoint(inner, x, use_reentrant=False).sum()
    graph = trace(y)
    assert len(calls) == 1  # unpacking a saved tensor would have recomputed it
    results = [n for n in graph.nodes if n.kind is NodeKind.SAVED and n.name == "result"]  # exp's and relu's
    assert len(results) == 2 and all(dict(n.attrs)["state"].startswith("not held") for n in results)
    assert all(n.tensor is not None and n.tensor.freed for n in results)
    y.backward()  # backward still recomputes and runs
    assert len(calls) == 2 and x.grad is not None


def test_a_larger_batch_changes_shapes_and_bytes_not_the_structure() -> None:
    torch.manual_seed(0)
    model = Net()
    small, large = trace_model(model, torch.randn(8, 16)), trace_model(model, torch.randn(32, 16))
    found = diff(small, large)
    assert not found.structural and not found.only_a and not found.only_b
    shapes = {(c.name, c.before, c.after) for c in found.changes if c.what == "shape"}
    assert ("ReluBackward0", "(8, 32)", "(32, 32)") in shapes
    assert all("8" in before and "32" in after for _, before, after in shapes)  # only the batch dimension moved
    # the sizes torch saved on the ops (to shape their gradients) follow the batch too; no other attribute moves
    sizes = {(c.name, c.attribute, c.before, c.after) for c in found.changes if c.what == "attributes"}
    assert ("AddmmBackward0", "mat1_sym_sizes", "(8, 32)", "(32, 32)") in sizes
    assert all(name.endswith("_sizes") and "8" in before and "32" in after for _, name, before, after in sizes)
    rows = {m.module: m for m in found.modules}
    assert rows["block"].bytes_after == 4 * rows["block"].bytes_before  # four times the rows, four times the bytes
    assert_same_graph(small, large, ignore={"shape", "saved_bytes", "attributes"})
    with pytest.raises(GraphDiffError, match="shape"):
        assert_same_graph(small, large)


def test_a_diff_picture_has_the_library_s_default_deadline_and_stops_at_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    import inspect

    from graphviz_app.drawing.diff_style import save_diff
    from graphviz_app.drawing.fallback import DEFAULT_TIMEOUT
    from graphviz_app.drawing.layout import LayoutTimeout

    assert inspect.signature(export_diff).parameters["timeout"].default == DEFAULT_TIMEOUT
    assert inspect.signature(save_diff).parameters["timeout"].default == DEFAULT_TIMEOUT
    hanging = tmp_path / "bin" / "dot"  # a layout that never ends
    hanging.parent.mkdir()
    hanging.write_text("#!/bin/sh\nexec /bin/sleep 60\n")
    hanging.chmod(0o755)
    monkeypatch.setenv("PATH", str(hanging.parent))
    with pytest.raises(LayoutTimeout, match=r"took over [0-9.]+ s.*allow more time \(timeout\)"):
        save_diff(_net_graph(), _net_graph(checkpointed=True), tmp_path / "diff.svg", engine="dot", timeout=1.0)
    assert not (tmp_path / "diff.svg").exists()
