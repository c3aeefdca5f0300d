"""Non-reentrant checkpointing in the replay: the block's saved tensors made again just before its backward."""

from __future__ import annotations

import pytest
import torch
import torch.utils.checkpoint
from mem_oracle import StepSpec, measured_as_by_hand, memtracker_peak

from graphviz_app import trace_model
from graphviz_app.analysis.memory import memory_timeline
from graphviz_app.memory import measure


class CheckpointedMLP(torch.nn.Module):
    """x -> down(gelu(up(x))) under `checkpoint(use_reentrant=False)`, summed; no biases."""

    def __init__(self, d: int = 16) -> None:
        super().__init__()
        self.up = torch.nn.Linear(d, 4 * d, bias=False)
        self.down = torch.nn.Linear(4 * d, d, bias=False)

    def mlp(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.nn.functional.gelu(self.up(x)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.utils.checkpoint.checkpoint(self.mlp, x, use_reentrant=False).sum()


@pytest.mark.parametrize("batch", [1, 8])
def test_the_recompute_is_alive_during_the_blocks_backward(batch: int) -> None:
    # rows = 16 per batch item, d = 16, hidden h = 4d. The step's input x is given (not counted), so are the
    # weights. Backward starts holding the loss (4 B) and its gradient (4 B). Just before down's MmBackward
    # (the block's first node with a packed tensor) the recompute makes up(x) and gelu(up(x)) (4 h rows B each;
    # x and the weights are saved again uncopied); down's MmBackward then makes the gradient for gelu's output
    # (4 h rows B) and for down.weight (4 d h B, kept as .grad): 8 + 3 * 4 h rows + 4 d h is the peak.
    d, rows = 16, 16 * batch
    h = 4 * d
    hand = 8 + 3 * 4 * h * rows + 4 * d * h
    x = torch.randn(rows, d, generator=torch.Generator().manual_seed(0))
    torch.manual_seed(0)
    m = measured_as_by_hand(lambda: CheckpointedMLP(d), x, batch, hand)
    assert m.predicted.forward_peak_bytes is not None and m.predicted.forward_peak_bytes < hand  # the backward's
    assert any("under non-reentrant checkpointing are recomputed" in n for n in m.predicted.notes)
    assert not any("does not count that recompute" in n for n in m.predicted.notes)


class TwoCheckpointedMLPs(torch.nn.Module):
    """Two `CheckpointedMLP` blocks in a row: the second block's input is kept by its checkpoint alone."""

    def __init__(self, d: int = 16) -> None:
        super().__init__()
        self.first, self.second = CheckpointedMLP(d), CheckpointedMLP(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.utils.checkpoint.checkpoint(self.first.mlp, x, use_reentrant=False)
        return torch.utils.checkpoint.checkpoint(self.second.mlp, h, use_reentrant=False).sum()


@pytest.mark.parametrize("batch", [1, 8])
def test_a_block_input_only_the_checkpoint_keeps_is_held_until_its_backward(batch: int) -> None:
    # As backward starts the step holds the loss and its gradient (4 B each) and h, the first block's output
    # (4 d rows B), which only the second block's checkpoint keeps (no op outside a block saves it).
    d, rows = 16, 16 * batch
    x = torch.randn(rows, d, generator=torch.Generator().manual_seed(0))
    torch.manual_seed(0)
    m = measure(TwoCheckpointedMLPs(d), x)
    spec = StepSpec(lambda: TwoCheckpointedMLPs(d), lambda b: ((x,), {}), lambda out: out)
    assert m.predicted.steps[0].before == 8 + 4 * d * rows
    assert m.measured.steps[0].after == m.predicted.steps[0].before  # the measured gradient made, as replayed
    assert m.predicted.peak_bytes == m.measured.peak_bytes == memtracker_peak(spec, batch).peak_bytes


def test_a_graph_without_the_recompute_sizes_says_the_replay_leaves_it_out() -> None:
    # trace_model does not read the checkpoint's frame: its timeline must say the recompute is not counted.
    x = torch.randn(16, 16, generator=torch.Generator().manual_seed(0))
    notes = memory_timeline(trace_model(CheckpointedMLP(16), x)).notes
    assert any("4 saved tensor(s) are packed by a saved-tensor hook" in n and "does not count that recompute" in n
               for n in notes)
    assert not any("under non-reentrant checkpointing are recomputed" in n for n in notes)
