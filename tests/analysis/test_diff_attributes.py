"""diff() compares what torch saved on an op (exponent, dim, scale, ...), never what graphviz-app noted on a node."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

import graphviz_app
from graphviz_app import Graph, assert_same_graph, diff, trace, trace_model
from graphviz_app.analysis.diff_view import diff_view, pair_view
from graphviz_app.drawing.diff_style import export_diff
from graphviz_app.errors import GraphDiffError
from graphviz_app.memory import measure
from graphviz_app.model import ANNOTATION_ATTRS, Edge, Node, NodeKind
from graphviz_app.model import annotations as annotations_module
from graphviz_app.viewer.compare import compare_payload


def _x() -> torch.Tensor:
    torch.manual_seed(0)
    return torch.randn(3, 4, requires_grad=True)


def _pow(exponent: float) -> tuple[Graph, object]:
    y = _x() ** exponent
    return trace(y.sum()), y.grad_fn._saved_exponent  # torch's own record of the attribute: the oracle


def test_x_squared_against_x_cubed_is_one_changed_op_naming_the_exponent() -> None:
    (a, two), (b, three) = _pow(2), _pow(3)
    found = diff(a, b)
    assert not found.structural and not found.empty
    (change,) = found.changes
    assert (change.what, change.attribute, change.name) == ("attributes", "exponent", "PowBackward0")
    assert (change.before, change.after) == (str(two), str(three)) == ("2", "3")
    assert found.counts()["attributes"] == 1
    assert "1 op-attribute change(s)" in str(found) and "~ PowBackward0: exponent 2 -> 3" in str(found)


def test_the_attribute_change_reaches_the_json_the_drawing_and_the_compare_panes() -> None:
    (a, _), (b, _) = _pow(2), _pow(3)
    pow_b = next(n.id for n in b.nodes if n.name == "PowBackward0")
    data = json.loads(export_diff(a, b, "json"))
    assert data["diff"]["nodes"] == {pow_b: "changed"}
    assert data["diff"]["changes"] == {pow_b: [["exponent", "2", "3"]]}
    assert data["diff"]["counts"]["attributes"] == 1
    assert "exponent: 2 -> 3" in export_diff(a, b, "dot").decode()
    assert diff_view(a, b).changes == {pow_b: [("exponent", "2", "3")]}
    pair = pair_view(a, b)
    i = next(k for k, n in enumerate(a.nodes) if n.name == "PowBackward0")
    assert pair.status_a[i] == "changed" and pair.changes_a == {i: [("exponent", "2", "3")]}
    panes = compare_payload(a, b, labels=("square", "cube"))
    assert panes["changes"][0] == {str(i): [["exponent", "2", "3"]]}
    assert panes["status"][0][i] == 3  # STATUSES[3] == "changed"


def test_summing_over_another_dim_says_which_dims() -> None:
    a_out, b_out = _x().sum(0), _x().sum(1)
    dims = (a_out.grad_fn._saved_dim, b_out.grad_fn._saved_dim)  # torch's own: (0,) and (1,)
    found = diff(trace(a_out.sum()), trace(b_out.sum()))
    dim = [c for c in found.changes if c.attribute == "dim"]
    assert [(c.name, c.before, c.after) for c in dim] == [("SumBackward1", str(dims[0]), str(dims[1]))]
    assert (dim[0].before, dim[0].after) == ("(0,)", "(1,)")


def test_a_changed_dropout_p_shows_as_the_p_torch_saved() -> None:
    """nn.Dropout on CUDA runs native_dropout, whose backward saves `p`; on CPU it multiplies by a
    mask (a saved tensor, no attribute), so the op is called here directly."""
    torch.manual_seed(0)
    x = torch.randn(4, 4, requires_grad=True)
    outs = [torch.native_dropout(x, p, True)[0] for p in (0.5, 0.2)]
    saved = [o.grad_fn._saved_p for o in outs]
    found = diff(trace(outs[0].sum()), trace(outs[1].sum()))
    assert [(c.name, c.attribute, c.before, c.after) for c in found.changes] == [
        ("NativeDropoutBackward0", "p", str(saved[0]), str(saved[1]))]
    assert (saved[0], saved[1]) == (0.5, 0.2)


def test_identical_traces_are_still_the_same() -> None:
    (a, _), (b, _) = _pow(2), _pow(2)
    assert diff(a, b).empty and str(diff(a, b)) == "the graphs are the same"


def test_a_graph_traced_without_attributes_is_not_an_attribute_change() -> None:
    y = _x() ** 2
    found = diff(trace(y.sum()), trace(y.sum(), show_attrs=False))
    assert found.counts()["attributes"] == 0 and found.empty


class _Checkpointed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(4, 8), nn.Linear(8, 2)

    def inner(self, t: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.a(t)) ** 2

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        return self.b(checkpoint(self.inner, t, use_reentrant=False))


def test_a_measured_trace_against_an_unmeasured_one_of_the_same_model_is_the_same() -> None:
    torch.manual_seed(0)
    model, x = _Checkpointed(), torch.randn(3, 4)
    measured, plain = measure(model, x).graph, trace_model(model, x)
    noted = {k for n in measured.nodes for k, _ in n.attrs if k in ANNOTATION_ATTRS}
    # the measured graph carries the step's notes the plain one lacks: bytes, checkpoint blocks, the peak
    assert {"backward temporaries", "checkpoint block", "recomputed bytes", "forward peak bytes"} <= noted
    assert noted - {k for n in plain.nodes for k, _ in n.attrs}
    found = diff(plain, measured)
    assert found.empty, str(found)
    assert_same_graph(plain, measured)


def _op(attrs: tuple[tuple[str, str], ...]) -> Graph:
    return Graph((Node("n0", NodeKind.OUTPUT, "output"), Node("n1", NodeKind.OP, "PowBackward0", attrs=attrs)),
                 (Edge("n1", "n0"),))


@pytest.mark.parametrize("key", sorted(ANNOTATION_ATTRS))
def test_an_annotation_whose_value_differs_on_both_sides_is_not_a_change(key: str) -> None:
    a, b = _op((("exponent", "2"), (key, "1"))), _op((("exponent", "2"), (key, "2")))
    assert diff(a, b).empty
    changed = diff(a, _op((("exponent", "3"), (key, "2"))))
    assert [(c.attribute, c.before, c.after) for c in changed.changes] == [("exponent", "2", "3")]


def test_assert_same_graph_names_the_attribute_and_can_ignore_attributes() -> None:
    (a, _), (b, _) = _pow(2), _pow(3)
    with pytest.raises(GraphDiffError, match=r"\(1 attributes; ignored: nothing\)[\s\S]*exponent 2 -> 3"):
        assert_same_graph(a, b)
    assert_same_graph(a, b, ignore="attributes")


def test_an_attribute_named_like_a_kind_of_change_is_labelled_apart() -> None:
    """The compare file's "dtype changed" colouring reads the rows' labels: a torch attribute called
    `dtype` must not read as the tensor's dtype."""
    found = diff(_op((("dtype", "torch.float32"),)), _op((("dtype", "torch.bfloat16"),)))
    (change,) = found.changes
    assert (change.what, change.attribute, change.label) == ("attributes", "dtype", "attribute dtype")
    assert change.row() == ("attribute dtype", "torch.float32", "torch.bfloat16")
    assert "~ PowBackward0: attribute dtype torch.float32 -> torch.bfloat16" in str(found)


def test_only_ops_attributes_are_compared_not_a_module_box_s_summary() -> None:
    box = (("ops", "3"),)
    a = Graph((Node("n0", NodeKind.OUTPUT, "output"), Node("n1", NodeKind.MODULE, "fc", attrs=box)),
              (Edge("n1", "n0"),))
    b = dataclasses.replace(a, nodes=(a.nodes[0], dataclasses.replace(a.nodes[1], attrs=(("ops", "4"),))))
    assert diff(a, b).empty


def test_every_annotation_is_named_once_in_the_model_and_listed() -> None:
    """A new annotation must be defined in graphviz_app/model/annotations.py and be in ANNOTATION_ATTRS,
    so diff() keeps ignoring it; nowhere else defines an `..._ATTR = "..."` name."""
    root = Path(graphviz_app.__file__).parent
    defined = re.compile(r"^[A-Z_]+_ATTR\s*=\s*\"", re.MULTILINE)
    elsewhere = [str(p.relative_to(root)) for p in root.rglob("*.py")
                 if p.name != "annotations.py" and "node_modules" not in p.parts and defined.search(p.read_text())]
    assert elsewhere == []
    names = {v for k, v in vars(annotations_module).items() if k.endswith("_ATTR")}
    assert names == ANNOTATION_ATTRS and len(names) >= 14
    assert {"state", "forward peak bytes", "differentiates", "checkpoint block", "recomputed bytes",
            "checkpoint keeps", "backward temporaries", "nested backward .grad", "checkpoint"} <= ANNOTATION_ATTRS
