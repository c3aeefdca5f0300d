"""Levers for a peak checkpointing cannot lower: each predicted on fake tensors, applied to the real step and
measured, against PyTorch's MemTracker on the same changed step."""

from __future__ import annotations

import dataclasses

import mem_zoo
import pytest
import torch
from mem_oracle import StepSpec, memtracker_accumulated_peak, memtracker_peak
from mem_zoo import Block, TinyGPT
from torch import nn
from torch.nn import functional as F
from torch.utils.checkpoint import checkpoint

from graphviz_app.analysis.memory.levers import LeverKind, chunked_loss_peak
from graphviz_app.memory import advise_checkpoints, measure
from graphviz_app.tracing.memory.changes import Changes, measure_changes, predict_changes
from graphviz_app.tracing.memory.lever_advice import lever_forecasts, verify_levers
from graphviz_app.tracing.memory.levers import free_grads
from graphviz_app.tracing.memory.step import Step


def _mlp() -> nn.Module:
    return nn.Sequential(*(nn.Linear(256, 256, bias=False) for _ in range(4)))


def _x(batch: int) -> torch.Tensor:
    return torch.randn(batch, 256, generator=torch.Generator().manual_seed(batch))


def _levers(step: Step) -> dict[LeverKind, object]:
    _, levers = lever_forecasts(step, 1)
    return {lever.kind: lever for lever in verify_levers(step, levers)}


def _with_free_grads(model: nn.Module) -> nn.Module:
    def drop(p: torch.Tensor) -> None:
        p.grad = None

    for p in model.parameters():
        p.register_post_accumulate_grad_hook(drop)
    return model


@pytest.mark.parametrize("batch", [1, 8])
def test_freeing_each_grad_is_predicted_measured_and_memtrackers(batch: int) -> None:
    # Four 256x256 weights and a tiny batch: the peak is the .grad at the end of backward (4 x 256 KiB).
    torch.manual_seed(0)
    model = _mlp()
    lever = _levers(Step(model, (_x(batch),), loss=lambda out: out.sum()))[LeverKind.FREE_GRADS]
    spec = StepSpec(_mlp, lambda b: ((_x(b),), {}), lambda out: out.sum(), _with_free_grads)
    oracle = memtracker_peak(spec, batch).peak_bytes
    assert lever.predicted_peak == lever.measured_peak == oracle  # type: ignore[attr-defined]
    plain = memtracker_peak(StepSpec(_mlp, lambda b: ((_x(b),), {}), lambda out: out.sum()), batch).peak_bytes
    assert lever.measured_before == plain and oracle < plain - 2 * 256 * 256 * 4  # type: ignore[attr-defined]
    assert all(p.grad is None for p in model.parameters())  # the model is left as it was


def test_free_grads_puts_the_hooks_back() -> None:
    net = nn.Linear(2, 2)
    with free_grads(net):
        pass
    net(torch.ones(1, 2)).sum().backward()
    assert net.weight.grad is not None


def _gpt_spec(autocast: torch.dtype | None = None) -> StepSpec:
    ids = torch.randint(0, 512, (8, 32), generator=torch.Generator().manual_seed(0))
    return StepSpec(TinyGPT, lambda b: ((ids[:b],), {}), lambda out: out, autocast=autocast)


@pytest.mark.slow
def test_autocast_and_micro_batches_are_predicted_measured_and_memtrackers() -> None:
    spec = _gpt_spec()
    torch.manual_seed(0)
    model = spec.build()
    (ids,), _ = spec.inputs(8)
    levers = _levers(Step(model, (ids,)))
    bf16 = levers[LeverKind.AUTOCAST]
    assert bf16.predicted_peak == bf16.measured_peak == memtracker_peak(_gpt_spec(torch.bfloat16), 8).peak_bytes  # type: ignore[attr-defined]
    micro = levers[LeverKind.MICRO_BATCH]
    k, size = micro.micro_batches  # type: ignore[attr-defined]
    assert k * size == 8 and k > 1
    oracle = memtracker_accumulated_peak(spec, size, k)
    assert micro.predicted_peak == micro.measured_peak == oracle  # type: ignore[attr-defined]
    assert oracle < micro.measured_before  # type: ignore[attr-defined]


def test_micro_batches_do_not_apply_at_batch_one() -> None:
    levers = _levers(Step(TinyGPT(), (torch.zeros(1, 8, dtype=torch.long),)))
    lever = levers[LeverKind.MICRO_BATCH]
    assert lever.predicted_peak is None and "the batch is already 1" in lever.reason  # type: ignore[attr-defined]


class _LM(nn.Module):
    """A small LM over a 2048-word vocabulary; with `chunks`, its loss computed chunk by chunk under checkpointing,
    as the chunked-loss lever tells a person to write it."""

    def __init__(self, chunks: int | None = None) -> None:
        super().__init__()
        self.embed = nn.Embedding(2048, 64)
        self.blocks = nn.ModuleList(Block(64) for _ in range(2))
        self.norm = nn.LayerNorm(64)
        self.head = nn.Linear(64, 2048, bias=False)
        self.chunks = chunks

    def _loss(self, h: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(self.head(h), y, reduction="sum")

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x)
        h, y = self.norm(x).flatten(0, 1), ids.flatten()
        if self.chunks is None:
            return F.cross_entropy(self.head(h), y)
        parts = [checkpoint(self._loss, hc, yc, use_reentrant=False) for hc, yc in
                 zip(h.chunk(self.chunks), y.chunk(self.chunks), strict=True)]
        return torch.stack(parts).sum() / y.numel()


@pytest.mark.parametrize("batch", [1, 8])
def test_the_chunked_loss_prediction_is_within_10_percent_of_the_loss_written_in_chunks(batch: int) -> None:
    ids = torch.randint(0, 2048, (batch, 64), generator=torch.Generator().manual_seed(0))
    torch.manual_seed(0)
    plain = measure(_LM(), ids)
    predicted = chunked_loss_peak(plain.graph, forward_peak=plain.measured.forward_peak_bytes)
    assert predicted is not None and predicted.cross_entropy and predicted.logits_shape == (64 * batch, 2048)
    spec = StepSpec(lambda: _LM(chunks=8), lambda b: ((ids,), {}), lambda out: out)
    written = memtracker_peak(spec, batch).peak_bytes
    torch.manual_seed(0)
    assert measure(_LM(chunks=8), ids).measured.peak_bytes == written
    assert abs(predicted.peak - written) <= 0.10 * written, (predicted.peak, written)


def test_the_advice_prints_each_lever_predicted_and_measured_and_the_best_combination() -> None:
    torch.manual_seed(0)
    ids = torch.randint(0, 2048, (4, 64), generator=torch.Generator().manual_seed(0))
    plan = advise_checkpoints(_LM(), ids, budget_bytes=1, verify=True)
    text = str(plan)
    assert not plan.reached and [lv.kind for lv in plan.levers] == [
        LeverKind.FREE_GRADS, LeverKind.AUTOCAST, LeverKind.MICRO_BATCH, LeverKind.CHUNKED_LOSS, LeverKind.COMBINED]
    assert text.count("verified: measured") == 5
    # Predicted and applied on top of the plan's checkpointed blocks, which alone miss the budget.
    assert plan.modules == plan.levers_on == ("blocks.0", "blocks.1")
    assert "each predicted on top of checkpointing the plan's 2 module(s)" in text
    assert ("applied by --verify: non-reentrant checkpointing of blocks.0, blocks.1; head's logits not made, "
            "F.cross_entropy over them computed in 8 chunks") in text
    assert "to do it in training: have the model return its last hidden states" in text
    assert "register_post_accumulate_grad_hook" in text
    combined = plan.levers[-1]
    # A .grad freed as soon as it is made cannot be accumulated over micro-batches: never both.
    assert len(combined.parts) >= 2 and not {LeverKind.FREE_GRADS, LeverKind.MICRO_BATCH} <= set(combined.parts)
    assert combined.predicted_peak < min(lv.predicted_peak for lv in plan.levers[:-1])  # type: ignore[type-var]
    for lever in plan.levers:
        assert lever.predicted_peak == lever.measured_peak, lever.what
    levers = plan.to_dict()["levers"]
    assert [lv["lever"] for lv in levers] == ["free_grads", "autocast_bf16", "micro_batch", "chunked_loss", "combined"]
    assert levers[3]["head"] == "head" and levers[4]["parts"] == [k.value for k in combined.parts]


def test_a_loss_that_captures_its_target_is_forecast_on_meta_and_verified() -> None:
    # The target the loss captures is moved to meta with the step, not made a fake tensor: the levers fall back to
    # meta there, as forecast() does, and still equal the real step.
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(1000, 32), nn.Linear(32, 1000))
    ids = torch.randint(0, 1000, (8, 64), generator=torch.Generator().manual_seed(0))
    levers = _levers(Step(model, (ids,), loss=lambda out: F.cross_entropy(out.flatten(0, 1), ids.flatten())))
    verified = [lv for lv in levers.values() if lv.measured_peak is not None]  # type: ignore[attr-defined]
    assert {lv.kind for lv in verified} >= {LeverKind.FREE_GRADS, LeverKind.AUTOCAST, LeverKind.MICRO_BATCH}  # type: ignore[attr-defined]
    assert all(lv.predicted_peak == lv.measured_peak for lv in verified)  # type: ignore[attr-defined]


@pytest.mark.slow
@pytest.mark.parametrize("batch", [1, 8])
def test_autocast_on_a_gru_is_predicted_on_fake_tensors_measured_and_memtrackers(batch: int) -> None:
    # A GRU runs torch's step-by-step cell on the CPU (no fused workspace): fake tensors count it as it runs.
    spec = mem_zoo.by_name("gru-tagger").spec
    torch.manual_seed(0)
    model = spec.build()
    args, kwargs = spec.inputs(batch)
    step = Step(model, args, kwargs, loss=spec.loss)
    predicted, _ = predict_changes(step, Changes(autocast=True))
    oracle = memtracker_peak(dataclasses.replace(spec, autocast=torch.bfloat16), batch).peak_bytes
    assert predicted == measure_changes(step, Changes(autocast=True)) == oracle
    assert oracle != memtracker_peak(spec, batch).peak_bytes  # bfloat16 changes what the step holds
