"""A sparse gradient (nn.Embedding(sparse=True)) is measured and shown like a dense one, not a crash."""

from __future__ import annotations

import torch
from torch import nn

from graphviz_app import trace
from graphviz_app.jobs.page import analysis_job, values_text
from graphviz_app.model import NodeKind
from graphviz_app.web.urlstate import Options


def test_trace_with_gradients_measures_a_sparse_embedding_gradient() -> None:
    torch.manual_seed(0)
    emb = nn.Embedding(10, 4, sparse=True)
    y = emb(torch.tensor([1, 2, 2])).sum()
    graph = trace(y, dict(emb.named_parameters()), gradients=True)
    (leaf,) = [n for n in graph.nodes if n.kind is NodeKind.LEAF]
    y.backward()
    assert emb.weight.grad is not None
    dense = emb.weight.grad.to_dense()  # torch's own gradient, the reference
    assert leaf.grad is not None and leaf.grad.numel == 40
    assert abs(leaf.grad.norm - float(dense.norm())) < 1e-6
    assert abs(leaf.grad.zero_fraction - float((dense == 0).double().mean())) < 1e-12


def test_the_page_shows_a_sparse_gradient_as_its_values() -> None:
    found = analysis_job("e = nn.Embedding(10, 4, sparse=True)\ne(torch.tensor([1, 2])).sum()", Options())
    grads = getattr(found, "grads", None)
    assert grads, f"no gradients: {found}"
    assert grads[0].name == "e.weight.grad" and grads[0].shape == "(10, 4)"
    assert grads[0].text.splitlines()[1] == " [1.0000, 1.0000, 1.0000, 1.0000],"


def test_values_text_reads_a_sparse_tensor() -> None:
    sparse = torch.sparse_coo_tensor(torch.tensor([[0, 2]]), torch.tensor([1.0, 2.0]), (4,))
    assert values_text(sparse) == "[1.0000, 0.0000, 2.0000, 0.0000]"
