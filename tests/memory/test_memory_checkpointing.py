"""Checkpointed models: gradients traced through them, notes that say what the replay leaves out, advice on
blocks in a ModuleList."""

from __future__ import annotations

import pytest
import torch
from mem_oracle import StepSpec, memtracker_peak
from mem_zoo import TinyGPT

from graphviz_app import memory_timeline, trace_model
from graphviz_app.errors import TraceError
from graphviz_app.memory import advise_checkpoints, forecast, measure
from graphviz_app.tracing.memory.checkpointing import checkpointed


def _ids(batch: int = 2) -> torch.Tensor:
    return torch.randint(0, 512, (batch, 8), generator=torch.Generator().manual_seed(0))


def test_gradients_through_non_reentrant_checkpointing_are_torchs() -> None:
    torch.manual_seed(0)
    model = TinyGPT(reentrant=False)
    graph = trace_model(model, _ids(), gradients=True)
    plain = TinyGPT()
    plain.load_state_dict(model.state_dict())
    plain(_ids()).backward()
    expected = {name: p.grad.norm().item() for name, p in plain.named_parameters()}
    got = {n.name: n.grad.norm for n in graph.nodes if n.kind.value == "leaf" and n.grad is not None}
    assert set(got) == set(expected)
    assert all(got[k] == pytest.approx(expected[k], rel=1e-5) for k in expected)
    assert "freed by backward" not in str(graph.summary())


def test_the_timeline_says_what_checkpointing_leaves_out() -> None:
    notes = measure(TinyGPT(reentrant=False), _ids()).predicted.notes
    assert any("4 block(s) under non-reentrant checkpointing are recomputed" in n for n in notes)
    assert any("the recompute's own temporaries are counted with the op that unpacked first" in n for n in notes)
    assert not any("freed by backward()" in n for n in notes)
    reentrant = measure(TinyGPT(reentrant=True), _ids()).predicted.notes
    assert any("4 block(s) under reentrant checkpointing" in n and "counted as the step ran" in n for n in reentrant)
    # A graph alone (no backward ran) says what it cannot count.
    alone = memory_timeline(trace_model(TinyGPT(reentrant=True), _ids())).notes
    assert any("4 block(s) under reentrant checkpointing" in n and "counts only the block's input" in n
               for n in alone)
    # trace_model ran every other op's backward on meta: only the blocks' insides are missing, and that note says so
    assert not any("temporaries each op's backward makes" in n for n in alone)


def test_advice_names_the_members_of_a_module_list_and_verify_applies_them() -> None:
    torch.manual_seed(0)
    model, ids = TinyGPT(), _ids(8)
    peak = measure(model, ids).measured.peak_bytes
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    plan = advise_checkpoints(model, ids, budget_bytes=params + ids.numel() * 8 + int(0.7 * peak), verify=True)
    assert plan.modules and "blocks" not in plan.modules
    assert all(m.startswith("blocks.") for m in plan.modules)
    assert plan.measured_peak_after is not None and plan.measured_peak_before is not None
    assert plan.measured_peak_after < plan.measured_peak_before
    assert f"applied non-reentrant checkpointing to {', '.join(plan.modules)}" in str(plan)
    # The peaks the plan states are forecast on fake tensors with and without the modules checkpointed: the real
    # step's, to the byte here; the replay that chose them is kept beside.
    assert (plan.predicted_peak_before, plan.predicted_peak_after) == (plan.measured_peak_before,
                                                                       plan.measured_peak_after)
    assert plan.replay_peaks is not None and plan.to_dict()["replay_peak_after"] == plan.replay_peaks[1]
    assert "forecast with and without them on fake tensors" in str(plan)


def test_a_module_list_cannot_be_checkpointed() -> None:
    with pytest.raises(TraceError, match="'blocks', a ModuleList whose forward never runs: name its members"):
        with checkpointed(TinyGPT(), ["blocks"]):
            pass


def test_reentrant_blocks_stay_visible_as_their_modules() -> None:
    graph = measure(TinyGPT(reentrant=True), _ids()).graph
    blocks = [n for n in graph.nodes if n.name == "CheckpointFunctionBackward"]
    assert sorted(n.module for n in blocks) == ["blocks.0", "blocks.1", "blocks.2", "blocks.3"]
    assert all(dict(n.attrs)["checkpoint"].startswith("reentrant") for n in blocks)
    assert {"blocks.0", "blocks.3"} <= {r.module for r in graph.module_summary()}


def test_when_checkpointing_cannot_help_the_plan_says_what_holds_the_peak() -> None:
    from mem_zoo import LeafTwice

    plan = advise_checkpoints(LeafTwice(256), torch.randn(8, 256), budget_bytes=1)
    text = str(plan)
    assert not plan.modules and not plan.reached
    assert "gradients in flight 768.0 KiB" in text and "register_post_accumulate_grad_hook" in text
    assert "is cannot get under" not in text
    assert plan.to_dict()["held_at_peak"]["gradients"] == 3 * 4 * 256 * 256 + 4


@pytest.mark.parametrize("reentrant", [False, True], ids=["non-reentrant", "reentrant"])
@pytest.mark.parametrize("batch", [1, 8])
def test_a_checkpointed_step_is_memtrackers_measured_and_forecast(reentrant: bool, batch: int) -> None:
    ids = _ids(batch) % 128
    spec = StepSpec(lambda: TinyGPT(vocab=128, d=32, layers=2, reentrant=reentrant), lambda b: ((ids,), {}),
                    lambda out: out)
    oracle = memtracker_peak(spec, batch).peak_bytes
    torch.manual_seed(0)
    model = TinyGPT(vocab=128, d=32, layers=2, reentrant=reentrant)
    assert measure(model, ids).measured.peak_bytes == oracle
    assert forecast(model, ids, policy="cpu").peak_bytes == oracle
