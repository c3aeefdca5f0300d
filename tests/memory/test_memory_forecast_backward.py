"""The forecast runs the step on meta (and fake tensors) as the device would: backward through grouped matmuls (MoE
experts) in float32 and inputs that require grad, grouped-query attention in the fused kernel; the peak is then
PyTorch's MemTracker's on the real step, not the replay's nor the math path's."""

from __future__ import annotations

import mem_zoo
import pytest
import torch
from mem_oracle import StepSpec, memtracker_peak

from graphviz_app import trace_model
from graphviz_app.memory import forecast, measure
from graphviz_app.tracing.memory.forecast import step_variant
from graphviz_app.tracing.memory.step import Step, run_step

NOT_ON_META = "were not run on meta"


class Experts(torch.nn.Module):
    """Two grouped matmuls over `experts` equal groups of rows, in float32 (torch's meta function takes bfloat16
    only; the CPU kernel runs float32)."""

    def __init__(self, experts: int = 4, d: int = 16, hidden: int = 32) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.up = torch.nn.Parameter(torch.randn(experts, d, hidden, generator=g) / 4)
        self.down = torch.nn.Parameter(torch.randn(experts, hidden, d, generator=g) / 4)
        self.experts = experts

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        offs = torch.arange(1, self.experts + 1, dtype=torch.int32, device=x.device) * (x.shape[0] // self.experts)
        h = torch.relu(torch._grouped_mm(x, self.up, offs=offs))
        return torch._grouped_mm(h, self.down, offs=offs).square().mean()


def _rows(rows: int, grad: bool) -> torch.Tensor:
    return torch.randn(rows, 16, generator=torch.Generator().manual_seed(rows)).requires_grad_(grad)


@pytest.mark.parametrize("policy", ["cpu", "cuda"])
@pytest.mark.parametrize("rows", [4, 64])
@pytest.mark.parametrize("grad", [False, True])
def test_grouped_matmuls_and_inputs_that_require_grad_run_backward_on_meta(rows: int, grad: bool,
                                                                           policy: str) -> None:
    # before: backward failed on meta (no float32 meta kernel for _grouped_mm's backward; an input's gradient sent
    # back off meta), and the forecast fell back to the replay with a note blaming .item()
    x = _rows(rows, grad)
    real = memtracker_peak(StepSpec(Experts, lambda b: ((x,), {}), lambda out: out), rows).peak_bytes
    predicted = forecast(Experts(), x, policy=policy)
    assert predicted.measured is not None, predicted.notes
    assert not any("backward could not run" in n or ".item()" in n for n in predicted.notes)
    assert predicted.peak_bytes == real
    assert measure(Experts(), x).measured.peak_bytes == real


@pytest.mark.parametrize(("batch", "cast"), [(None, False), (8, False), (None, True)])
def test_an_input_that_requires_grad_gets_its_grad_on_meta(batch: int | None, cast: bool) -> None:
    """x stays a leaf when moved to meta, resized or cast (before: a copy whose backward sent x's gradient back to
    the CPU tensor and failed, so the forecast was the replay's)."""
    x = torch.randn(4, 16, requires_grad=True)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
    predicted = forecast(model, x, batch=batch, dtype=torch.bfloat16 if cast else None, cast=cast,
                         loss=lambda out: out.sum())
    assert predicted.measured is not None, predicted.notes
    rows = batch or 4
    if not cast:
        real_x = torch.randn(rows, 16, requires_grad=True)
        real = memtracker_peak(StepSpec(lambda: model, lambda b: ((real_x,), {}), lambda out: out.sum()), rows)
        assert predicted.peak_bytes == real.peak_bytes
    assert x.device.type == "cpu" and x.grad is None and x.is_leaf


def test_a_traced_moe_has_each_grouped_matmuls_backward_run_on_meta() -> None:
    graph = trace_model(Experts(), _rows(8, False))
    assert not any(NOT_ON_META in n for n in graph.notes)


@pytest.mark.slow
@pytest.mark.parametrize("batch", [1, 4])
def test_mixtral_forecast_is_memtrackers_peak(batch: int) -> None:
    # before: 6.3% over at batch 4 (the replay's, with the attention's math path on meta), and no backward there
    spec = mem_zoo.by_name("mixtral-moe").spec
    real = memtracker_peak(spec, batch).peak_bytes
    torch.manual_seed(0)
    args, kwargs = spec.inputs(batch)
    predicted = forecast(spec.build(), *args, loss=spec.loss, policy="cpu", **kwargs)
    assert predicted.measured is not None, predicted.notes
    assert predicted.peak_bytes == real
    assert not any(NOT_ON_META in n for n in predicted.graph.notes)


class GroupedQueryAttention(torch.nn.Module):
    """Causal attention with 4 query heads over 2 key/value heads, passed as transformers' Llama passes it
    (`enable_gqa=True`, no mask)."""

    def __init__(self, d: int = 32) -> None:
        super().__init__()
        self.q, self.kv, self.out = torch.nn.Linear(d, d), torch.nn.Linear(d, d), torch.nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        q = self.q(x).view(b, n, 4, d // 4).transpose(1, 2)
        k, v = self.kv(x).view(b, n, 2, d // 2).transpose(1, 2).chunk(2, dim=-1)
        o = torch.nn.functional.scaled_dot_product_attention(q, k.contiguous(), v.contiguous(), is_causal=True,
                                                             enable_gqa=True)
        return self.out(o.transpose(1, 2).reshape(b, n, d)).square().mean()


@pytest.mark.parametrize("batch", [1, 4])
def test_grouped_query_attention_on_meta_runs_cpus_flash_kernel(batch: int) -> None:
    # before: meta took the math path (key and value repeated, the length x length weights saved): +7.9% on
    # transformers' Llama at batch 4 on the meta path
    x = torch.randn(batch, 64, 32, generator=torch.Generator().manual_seed(0))
    real = memtracker_peak(StepSpec(GroupedQueryAttention, lambda b: ((x,), {}), lambda out: out), batch).peak_bytes
    torch.manual_seed(0)
    on_meta = run_step(step_variant(Step(GroupedQueryAttention(), (x,)), device="meta", policy="cpu"))
    assert on_meta.measured is not None and on_meta.measured.peak_bytes == real
    names = {n.name for n in on_meta.graph.nodes}
    assert "ScaledDotProductFlashAttentionForCpuBackward0" in names and "SafeSoftmaxBackward0" not in names


def test_grouped_query_attention_on_cuda_takes_flash_in_bfloat16_and_the_math_path_in_float32() -> None:
    """torch's sdp_utils: flash attention takes grouped heads (bfloat16, no mask); memory-efficient attention
    does not, so float32 falls back to the math path, which repeats key and value."""
    x = torch.randn(2, 64, 32)
    half = run_step(step_variant(Step(GroupedQueryAttention(), (x,)), device="meta", dtype=torch.bfloat16,
                                 cast=True, policy="cuda"), measure=False).graph
    assert "ScaledDotProductFlashAttentionBackward0" in {n.name for n in half.nodes}
    full = run_step(step_variant(Step(GroupedQueryAttention(), (x,)), device="meta", policy="cuda"),
                    measure=False).graph
    assert "SafeSoftmaxBackward0" in {n.name for n in full.nodes}


@pytest.mark.slow
@pytest.mark.parametrize("name", ["llama", "mixtral-moe"])
def test_a_grouped_query_language_model_on_meta_is_memtrackers_peak(name: str) -> None:
    spec = mem_zoo.by_name(name).spec
    real = memtracker_peak(spec, 4).peak_bytes
    torch.manual_seed(0)
    args, kwargs = spec.inputs(4)
    on_meta = run_step(step_variant(Step(spec.build(), args, kwargs, loss=spec.loss), device="meta", policy="cpu"))
    assert on_meta.measured is not None and on_meta.measured.peak_bytes == real


class CheckpointedAttention(torch.nn.Module):
    """Two causal self-attention blocks, each under non-reentrant checkpointing (transformers'
    `gradient_checkpointing_enable()` default): backward runs each block's forward again."""

    def __init__(self, d: int = 32) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList(torch.nn.Linear(d, 3 * d) for _ in range(2))
        self.head = torch.nn.Linear(d, 1)

    @staticmethod
    def _attend(proj: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        q, k, v = proj(x).view(b, n, 3, 4, d // 4).permute(2, 0, 3, 1, 4).unbind(0)
        return x + torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2) \
            .reshape(b, n, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for proj in self.blocks:
            x = torch.utils.checkpoint.checkpoint(self._attend, proj, x, use_reentrant=False)
        return self.head(x).square().mean()


@pytest.mark.parametrize("batch", [1, 4])
def test_a_checkpointed_blocks_recompute_on_meta_runs_as_its_forward_did(batch: int) -> None:
    # before: the recompute ran outside the forward's meta attention (and MetaAutocast), saved other tensors and
    # torch's checkpoint raised "A different number of tensors was saved": transformers' T5 with
    # gradient_checkpointing_enable() fell back to the replay under `graphviz-app memory --device meta`
    x = torch.randn(batch, 16, 32, generator=torch.Generator().manual_seed(batch))
    spec = StepSpec(CheckpointedAttention, lambda b: ((x,), {}), lambda out: out)
    real = memtracker_peak(spec, batch).peak_bytes
    torch.manual_seed(0)
    for policy in ("cpu", "cuda"):
        step = step_variant(Step(CheckpointedAttention(), (x,)), device="meta", policy=policy)
        on_meta = run_step(step)
        assert on_meta.measured is not None
        if policy == "cpu":
            assert on_meta.measured.peak_bytes == real
