"""What an op's backward makes inside, and a reentrant checkpoint's nested backward, in the replay; gradient sums
in place or not, against torch's own profiler."""

from __future__ import annotations

import pytest
import torch
import torch.utils.checkpoint
from mem_models import Cube
from mem_oracle import StepSpec, measured_as_by_hand, memtracker_peak
from torch.profiler import ProfilerActivity, profile

from graphviz_app import memory_timeline, trace, trace_model
from graphviz_app.analysis.memory.op_bytes import (
    NESTED_GRADS_ATTR,
    NESTED_LEAF_GRADS_ATTR,
    REENTRANT_KEEPS_ATTR,
    TEMPORARIES_ATTR,
)
from graphviz_app.memory import measure


class ReentrantMLP(torch.nn.Module):
    """x * scale -> down(gelu(up(.))) under `checkpoint(use_reentrant=True)`, summed; no biases. The scale makes
    the block's input require grad (a reentrant checkpoint of inputs that do not has no graph)."""

    def __init__(self, d: int = 16) -> None:
        super().__init__()
        self.scale = torch.nn.Parameter(torch.ones(d))
        self.up = torch.nn.Linear(d, 4 * d, bias=False)
        self.down = torch.nn.Linear(4 * d, d, bias=False)

    def mlp(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.nn.functional.gelu(self.up(x)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.utils.checkpoint.checkpoint(self.mlp, x * self.scale, use_reentrant=True).sum()


def _x(rows: int, d: int) -> torch.Tensor:
    return torch.randn(rows, d, generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("batch", [1, 8])
def test_an_ops_backward_temporaries_are_replayed(batch: int) -> None:
    # rows = 16 per batch item, d = 32: the hand count is Cube.peak_by_hand's (8 + 4 S, 2 S of it PowBackward0's)
    d, rows = 32, 16 * batch
    hand, s = Cube.peak_by_hand(rows, d)
    x = _x(rows, d)
    m = measured_as_by_hand(lambda: Cube(d), x, batch, hand)
    pow_node = next(n for n in m.graph.nodes if n.name == "PowBackward0")
    assert dict(pow_node.attrs)[TEMPORARIES_ATTR] == str(2 * s)
    assert m.predicted.peak_node == pow_node.id


def test_a_graph_alone_says_the_temporaries_are_not_in_it() -> None:
    # trace_model finds them on meta (tests/memory/test_memory_op_temporaries.py); a plain trace() does not.
    x = _x(16, 32).requires_grad_()
    timeline = memory_timeline(trace(Cube(32)(x)))
    # without the temporaries: 8 + 2 S, and w's .grad (4 d; no module here, so w is not a given parameter)
    assert timeline.peak_bytes == 8 + 2 * 4 * 16 * 32 + 4 * 32
    assert any("temporaries each op's backward makes" in n for n in timeline.notes)


def test_a_measured_step_whose_ops_made_no_temporaries_does_not_say_they_are_missing() -> None:
    # Linear and ReLU: each backward returns its gradients and makes nothing beside them (BERT-like
    # graphs had the "not in this graph" note though the run had recorded every op, none with temporaries).
    model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    m = measure(model, _x(16, 32))
    assert not any(TEMPORARIES_ATTR == k for n in m.graph.nodes for k, _ in n.attrs)
    assert m.predicted.peak_bytes == m.measured.peak_bytes
    assert not any("temporaries each op's backward makes" in n for n in m.predicted.notes)


@pytest.mark.parametrize("batch", [1, 8])
def test_a_reentrant_blocks_nested_backward_is_replayed(batch: int) -> None:
    # rows = 16 per batch item, d = 16, h = 4d; x and the weights are given. Backward starts with the loss and its
    # gradient (8 B) and the block's input x * scale (4 d rows B, saved by the checkpoint). Inside
    # CheckpointFunctionBackward the block's forward runs again, holding up(.) and gelu(up(.)) (4 h rows B each,
    # saved by the nested graph) and its output (4 d rows B, held until the nested backward returns); down's
    # MmBackward then makes the gradient for gelu's output (4 h rows B) and down.weight's .grad (4 d h B):
    # 8 + 3 * 4 h rows + 2 * 4 d rows + 4 d h is the peak. The blocks' .grad (4 d h B each) stay.
    d, rows = 16, 16 * batch
    h = 4 * d
    hand = 8 + 3 * 4 * h * rows + 2 * 4 * d * rows + 4 * d * h
    x = _x(rows, d)
    torch.manual_seed(0)
    m = measured_as_by_hand(lambda: ReentrantMLP(d), x, batch, hand)
    block = next(n for n in m.graph.nodes if n.name == "CheckpointFunctionBackward")
    assert dict(block.attrs)[NESTED_GRADS_ATTR] == str(2 * 4 * d * h)
    # At the end: the three .grad (scale's 4 d B), and in the replay the loss and its gradient, which backward()
    # holds until it returns (after the last node's step was measured).
    assert m.measured.steps[-1].after == 2 * 4 * d * h + 4 * d
    assert m.predicted.steps[-1].after == 2 * 4 * d * h + 4 * d + 8
    assert any("counted as the step ran" in n for n in m.predicted.notes)


def _profiled_peak(model: torch.nn.Module, x: torch.Tensor) -> int:
    """The step's peak from torch.profiler's memory events: a plain run, no dispatch mode."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        model(x).backward()
    live = peak = 0
    for e in sorted(prof.profiler.kineto_results.events(), key=lambda e: e.start_ns()):
        if e.name() == "[memory]":
            live += e.nbytes()
            peak = max(peak, live)
    return peak


class UsedThrice(torch.nn.Module):
    """w used by three elementwise ops: its gradients are summed twice in its input buffer."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (self.w * 2).sum() + (self.w * 3).sum() + (self.w * x).sum()


@pytest.mark.parametrize("d", [64, 256])
def test_sums_are_in_place_in_a_plain_step_and_new_under_a_dispatch_mode(d: int) -> None:
    # Three gradients of G = 4 d^2 B for w: a plain step sums them in place (two alive at once), under a dispatch
    # mode (MemTracker, our CPU counter) torch sums into a new tensor (three). Beside them, a few 4-byte scalars
    # (the loss, its gradient, the sums' gradients) that the profiler and the replay place a little differently.
    g = 4 * d * d
    x = torch.tensor(4.0)
    model = UsedThrice(d)
    plain = _profiled_peak(model, x)
    model.w.grad = None
    assert 2 * g < plain < 2 * g + 64
    assert abs(memory_timeline(trace_model(model, x)).peak_bytes - plain) <= 8
    m = measure(model, x)
    spec = StepSpec(lambda: UsedThrice(d), lambda b: ((x,), {}), lambda out: out)
    assert m.measured.peak_bytes == memtracker_peak(spec, 1).peak_bytes
    assert 3 * g < m.measured.peak_bytes < 3 * g + 64
    assert abs(m.predicted.peak_bytes - m.measured.peak_bytes) <= 8


class ReentrantWithTuple(torch.nn.Module):
    """A reentrant block given a tuple (as rotary cos and sin are): the checkpoint keeps the tuple as it is."""

    def __init__(self, d: int = 16) -> None:
        super().__init__()
        self.scale = torch.nn.Parameter(torch.ones(d))
        self.up = torch.nn.Linear(d, d, bias=False)

    def block(self, h: torch.Tensor, extra: tuple[torch.Tensor]) -> torch.Tensor:
        return self.up(h * extra[0])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        extra = (x * 2.0,)  # made in the step, no grad: no graph node describes it
        return torch.utils.checkpoint.checkpoint(self.block, x * self.scale, extra, use_reentrant=True).sum()


@pytest.mark.parametrize("batch", [1, 8])
def test_what_a_reentrant_checkpoint_keeps_of_other_arguments_is_held(batch: int) -> None:
    # x * 2.0 (4 d rows B) stays alive in the checkpoint's ctx.inputs for the whole step: the replay holds it.
    d, rows = 16, 16 * batch
    x = _x(rows, d)
    torch.manual_seed(0)
    m = measure(ReentrantWithTuple(d), x)
    block = next(n for n in m.graph.nodes if n.name == "CheckpointFunctionBackward")
    assert dict(block.attrs)[REENTRANT_KEEPS_ATTR] == str(4 * d * rows)
    spec = StepSpec(lambda: ReentrantWithTuple(d), lambda b: ((x,), {}), lambda out: out)
    assert m.predicted.peak_bytes == m.measured.peak_bytes == memtracker_peak(spec, batch).peak_bytes
    assert m.predicted.steps[0].after == m.measured.steps[0].after  # the end of the forward: it is held there


class ReentrantSharedScale(ReentrantMLP):
    """ReentrantMLP whose `scale` is used outside the block (x * scale) and inside it again (its input * scale)."""

    def mlp(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.nn.functional.gelu(self.up(x * self.scale)))


@pytest.mark.parametrize("batch", [1, 8])
def test_a_parameter_used_inside_and_outside_a_reentrant_block_has_one_grad(batch: int) -> None:
    # As the ReentrantMLP case, with t = x * scale again inside the block (4 d rows B, saved by up's mm) alive at
    # down's MmBackward: 8 + 3 * 4 h rows + 3 * 4 d rows + 4 d h is the peak. The nested backward makes scale's
    # .grad (4 d B) with the blocks' (4 d h B each); the outer MulBackward0's gradient for scale is then summed into
    # it in place: the step ends with the three .grad, scale's once.
    d, rows = 16, 16 * batch
    h = 4 * d
    hand = 8 + 3 * 4 * h * rows + 3 * 4 * d * rows + 4 * d * h
    x = _x(rows, d)
    torch.manual_seed(0)
    m = measured_as_by_hand(lambda: ReentrantSharedScale(d), x, batch, hand)
    scale = next(n for n in m.graph.nodes if n.kind.value == "leaf" and n.name.endswith("scale"))
    block = next(n for n in m.graph.nodes if n.name == "CheckpointFunctionBackward")
    assert dict(block.attrs)[NESTED_GRADS_ATTR] == str(2 * 4 * d * h + 4 * d)
    assert dict(block.attrs)[NESTED_LEAF_GRADS_ATTR] == f"{scale.id}={4 * d}"
    # scale's AccumulateGrad ran inside the block too (torch keeps one per tensor): still one measured step each
    assert [s.node for s in m.measured.steps] == [s.node for s in m.predicted.steps]
    assert m.measured.steps[-1].after == 2 * 4 * d * h + 4 * d
    assert m.predicted.steps[-1].after == 2 * 4 * d * h + 4 * d + 8  # + the loss and its gradient, as above
    assert not any("counted twice" in n for n in m.predicted.notes)
