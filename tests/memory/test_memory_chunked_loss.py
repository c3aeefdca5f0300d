"""The loss computed in chunks over the tokens: the helper against torch's own cross-entropy, applied to unchanged
models (a hand-written LM, transformers' GPT-2 with a tied head) and its lever's predicted peak against the
measured step and PyTorch's MemTracker on the same changed step."""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

import mem_zoo
import pytest
import torch
from mem_oracle import StepSpec, memtracker_peak
from torch import nn
from torch.nn import functional as F

from graphviz_app.analysis.memory.levers import LeverKind
from graphviz_app.errors import ChunkedLossError
from graphviz_app.memory import chunked_cross_entropy
from graphviz_app.tracing.memory.changes import Changes, measure_changes, predict_changes
from graphviz_app.tracing.memory.chunked_loss import chunked_head
from graphviz_app.tracing.memory.lever_advice import lever_forecasts
from graphviz_app.tracing.memory.step import Step

_CASES = [
    dict(),
    dict(reduction="sum"),
    dict(reduction="none"),
    dict(ignore_index=3),
    dict(label_smoothing=0.1),
    dict(weight=True),
    dict(bias=True, chunks=3),
    dict(logit_bias=True),
    dict(chunks=50),  # more chunks than rows: one row each
]


@pytest.mark.parametrize("case", _CASES, ids=[str(c) for c in _CASES])
def test_the_value_and_gradients_are_torchs_cross_entropy(case: dict[str, Any]) -> None:
    g = torch.Generator().manual_seed(0)
    hidden = torch.randn(37, 16, generator=g, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(50, 16, generator=g, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(50, generator=g, dtype=torch.float64, requires_grad=True) if case.get("bias") else None
    target = torch.randint(0, 50, (37,), generator=g)
    target[::5] = case.get("ignore_index", -100)
    classes = torch.rand(50, generator=g, dtype=torch.float64) if case.get("weight") else None
    kw = {k: case[k] for k in ("reduction", "ignore_index", "label_smoothing") if k in case}
    extra = torch.randn(50, generator=g, dtype=torch.float64) if case.get("logit_bias") else None
    ours = chunked_cross_entropy(hidden, weight, target, bias=bias, class_weight=classes,
                                 chunks=case.get("chunks", 8), logit_bias=extra, **kw)
    logits = F.linear(hidden, weight, bias) + (extra if extra is not None else 0)
    torchs = F.cross_entropy(logits, target, weight=classes, **kw)
    assert torch.allclose(ours, torchs)
    inputs = [t for t in (hidden, weight, bias) if t is not None]
    got = torch.autograd.grad(ours.sum(), inputs)
    want = torch.autograd.grad(torchs.sum(), inputs)
    assert all(torch.allclose(a, b) for a, b in zip(got, want, strict=True))


@pytest.mark.parametrize(("call", "match"), [
    (lambda h, w, y: chunked_cross_entropy(h.view(2, 3, 4), w, y), r"hidden \(rows, features\).*flatten"),
    (lambda h, w, y: chunked_cross_entropy(h, w, y[:5]), r"got \(6, 4\) and \(5,\)"),
    (lambda h, w, y: chunked_cross_entropy(h, w, y, chunks=0), "chunks must be at least 1, got 0"),
    (lambda h, w, y: chunked_cross_entropy(h, w, y, reduction="max"), "reduction must be 'mean', 'sum' or 'none'"),
])
def test_bad_arguments_say_what_to_do(call: Any, match: str) -> None:
    with pytest.raises(ChunkedLossError, match=match):
        call(torch.randn(6, 4), torch.randn(10, 4), torch.arange(6))


class _LM(nn.Module):
    """A small LM over a 2048-word vocabulary; `written` computes its loss in chunks by hand, `softmax` through
    log_softmax and nll_loss (which the lever cannot rewrite)."""

    def __init__(self, how: str = "plain") -> None:
        super().__init__()
        self.embed = nn.Embedding(2048, 64)
        self.blocks = nn.ModuleList(mem_zoo.Block(64) for _ in range(2))
        self.norm = nn.LayerNorm(64)
        self.head = nn.Linear(64, 2048, bias=False)
        self.how = how

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x)
        h, y = self.norm(x).flatten(0, 1), ids.flatten()
        if self.how == "written":
            return chunked_cross_entropy(h, self.head.weight, y)
        if self.how == "softmax":
            return F.nll_loss(F.log_softmax(self.head(h), -1), y)
        return F.cross_entropy(self.head(h), y)


def _ids(batch: int) -> torch.Tensor:
    return torch.randint(0, 2048, (batch, 64), generator=torch.Generator().manual_seed(batch))


def _chunked_spec(spec: StepSpec, head: str) -> StepSpec:
    """The oracle's step with the head's loss chunked, as --verify applies it (kept applied for MemTracker's run)."""
    kept: list[contextlib.AbstractContextManager[Any]] = []

    def prepare(model: nn.Module) -> nn.Module:
        model = spec.prepare(model)
        kept.append(chunked_head(model, head))
        kept[-1].__enter__()
        return model

    return dataclasses.replace(spec, prepare=prepare)


@pytest.mark.parametrize("batch", [1, 8])
def test_the_chunked_lever_is_predicted_measured_memtrackers_and_the_loss_written_by_hand(batch: int) -> None:
    torch.manual_seed(0)
    step = Step(_LM(), (_ids(batch),))
    predicted, _ = predict_changes(step, Changes(head="head"))
    measured = measure_changes(step, Changes(head="head"))
    spec = StepSpec(_LM, lambda b: ((_ids(b),), {}), lambda out: out)
    assert predicted == measured == memtracker_peak(_chunked_spec(spec, "head"), batch).peak_bytes
    # The same LM with chunked_cross_entropy written into its forward holds the same bytes.
    written = memtracker_peak(dataclasses.replace(spec, build=lambda: _LM("written")), batch).peak_bytes
    assert measured == written
    plain = memtracker_peak(spec, batch).peak_bytes
    if batch == 8:
        assert measured < plain - 2048 * 64 * batch * 4  # at least the logits (rows x vocabulary, float32) less
    else:  # 64 rows: each chunk's head-weight gradient (2048 x 64), summed with the others', outweighs the logits
        assert measured > plain


def test_the_applied_loss_equals_the_plain_one() -> None:
    torch.manual_seed(0)
    model, ids = _LM(), _ids(2)
    plain = model(ids)
    with chunked_head(model, "head") as calls:
        chunked = model(ids)
    assert calls == [1] and torch.allclose(plain, chunked)
    assert "forward" not in vars(model.head)  # put back


def test_a_loss_the_lever_cannot_rewrite_is_a_bound_saying_why_and_what_to_write() -> None:
    torch.manual_seed(0)
    model = _LM("softmax")
    with pytest.raises(ChunkedLossError, match="the head's logits are used by log_softmax"), \
            chunked_head(model, "head"):
        model(_ids(1))
    _, levers = lever_forecasts(Step(model, (_ids(4),)), 1)
    lever = next(lv for lv in levers if lv.kind is LeverKind.CHUNKED_LOSS)
    assert lever.head is None and lever.predicted_peak is not None and "a lower bound" in lever.how
    assert lever.manual is not None and lever.manual.startswith(
        "not applied by --verify: it cannot be applied to this step automatically (the head's logits are used by "
        "log_softmax")
    assert "graphviz_app.memory.chunked_cross_entropy(hidden.flatten(0, -2), head.weight" in lever.manual


def test_a_head_that_is_not_a_linear_is_refused() -> None:
    with pytest.raises(ChunkedLossError, match=r"made by 0 \(Embedding\), not an nn.Linear"), \
            chunked_head(nn.Sequential(nn.Embedding(4, 4)), "0"):
        pass


@pytest.mark.slow
@pytest.mark.parametrize("batch", [1, 4])
def test_gpt2s_tied_head_chunked_is_predicted_measured_and_memtrackers(batch: int) -> None:
    zoo = mem_zoo.by_name("gpt2")
    spec = zoo.spec
    torch.manual_seed(0)
    model = spec.prepare(spec.build())
    args, kwargs = spec.inputs(batch)
    step = Step(model, args, kwargs, loss=spec.loss)
    _, levers = lever_forecasts(step, 1)
    lever = next(lv for lv in levers if lv.kind is LeverKind.CHUNKED_LOSS)
    assert lever.head == "lm_head"  # the graph's logits come from lm_head, whose weight is the embedding's
    measured = measure_changes(step, Changes(head="lm_head"))
    assert lever.predicted_peak == measured == memtracker_peak(_chunked_spec(spec, "lm_head"), batch).peak_bytes
    model.eval()  # no dropout: the two forwards compute the same logits
    plain = model(*args, **kwargs).loss
    with chunked_head(model, "lm_head") as calls:
        chunked = model(*args, **kwargs).loss
    assert calls == [1] and torch.allclose(chunked, plain)  # the labels shifted and -100 ignored as transformers does


class _Shifted(nn.Module):
    """A causal LM's loss as older transformers wrote it: the last position's logits sliced off, the labels shifted."""

    def __init__(self, how: str = "shift") -> None:
        super().__init__()
        self.embed = nn.Embedding(100, 16)
        self.head = nn.Linear(16, 100)
        self.how = how

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        logits = self.head(self.embed(ids))
        if self.how == "fold":
            return F.cross_entropy(logits.flatten().view(-1, 100), ids.flatten())
        shifted = logits[..., :-1, :].contiguous().float()
        return F.cross_entropy(shifted.view(-1, shifted.size(-1)), ids[..., 1:].reshape(-1))


def test_row_wise_reshapes_of_the_logits_are_applied_to_the_heads_input() -> None:
    torch.manual_seed(0)
    model, ids = _Shifted(), torch.randint(0, 100, (3, 7), generator=torch.Generator().manual_seed(0))
    plain = model(ids)
    with chunked_head(model, "head") as calls:
        chunked = model(ids)
    assert calls == [1] and torch.allclose(plain, chunked)
    folded = _Shifted("fold")
    with pytest.raises(ChunkedLossError, match=r"\.flatten\(0, -1\), which folds the vocabulary into the rows"), \
            chunked_head(folded, "head"):
        folded(ids)
