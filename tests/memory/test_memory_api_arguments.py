"""`graphviz_app.memory`'s arguments checked before anything runs: a TraceError naming the argument and what to pass,
never torch's own error about something the person did not write (a "device string", a comparison of int and str)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from graphviz_app.errors import TraceError
from graphviz_app.memory import advise_checkpoints, checkpoint_modules, forecast, largest_batch_for, measure


def _mlp() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))


X = torch.randn(4, 8)

# (call, the message it must give); before: 0 ran as a batch of nothing, -3 reached torch ("negative dimension"),
# "bfloat16" was read as a device ("Invalid device string"), "16GiB" failed comparing int and str, -5 returned 0.
CASES: list[tuple[str, Callable[[], Any], str]] = [
    ("batch 0", lambda: forecast(_mlp(), X, batch=0), r"batch: expected a whole number from 1 up .*got 0"),
    ("batch -3", lambda: forecast(_mlp(), X, batch=-3), r"batch: expected a whole number from 1 up .*got -3"),
    ("seq_len 2.5", lambda: forecast(_mlp(), X, seq_len=2.5), r"seq_len: expected a whole number .*got 2.5"),
    ("dtype text", lambda: forecast(_mlp(), X, dtype="bfloat16"),
     r"dtype: expected a torch.dtype, got 'bfloat16': pass torch.bfloat16"),
    ("policy", lambda: forecast(_mlp(), X, policy="tpu"), r"policy: expected 'cuda' or 'cpu' .*got 'tpu'"),
    ("device", lambda: forecast(_mlp(), X, device="gpu"),
     r"device: expected 'meta' \(nothing allocated\), 'cpu', 'cuda' or 'cuda:N', got 'gpu'"),
    ("not a module", lambda: forecast(lambda t: t.sum(), X), r"model: expected a torch.nn.Module, got function"),
    ("measure not a module", lambda: measure(lambda t: t.sum(), X), r"model: expected a torch.nn.Module"),
    ("budget text", lambda: largest_batch_for(_mlp(), X, budget_bytes="16GiB"),
     r"budget_bytes: expected a whole number of bytes from 1 up, got '16GiB': a size in bytes, e.g. 16 \* 2\*\*30"),
    ("budget negative", lambda: largest_batch_for(_mlp(), X, budget_bytes=-5), r"budget_bytes: .*got -5"),
    ("advise budget", lambda: advise_checkpoints(_mlp(), X, budget_bytes=-1), r"budget_bytes: .*got -1"),
    ("modules text", lambda: checkpoint_modules(_mlp(), "0"),
     r"modules: expected a list of module names \(plan.modules\), got the string '0'; pass \['0'\]"),
]


@pytest.mark.parametrize(("call", "match"), [(c, m) for _, c, m in CASES], ids=[n for n, _, _ in CASES])
def test_a_bad_argument_is_named_with_what_to_pass(call: Callable[[], Any], match: str) -> None:
    with pytest.raises(TraceError, match=match):
        call()


def test_a_seq_len_the_model_refuses_names_the_input_it_resized() -> None:
    # before: only torch's "a and b must have same reduction dim ... forecast on the real device"
    with pytest.raises(TraceError, match=r"the inputs resized: args\[0\] \(4, 8\) -> \(4, 16\) \(batch sets the "
                                         r"first dimension .*seq_len the second"):
        forecast(_mlp(), X, seq_len=16)


def test_an_input_the_model_refuses_says_to_check_it_not_only_to_use_the_real_device() -> None:
    with pytest.raises(TraceError, match=r"\(in aten::mm\): check the inputs' shapes and dtypes") as caught:
        forecast(_mlp(), torch.randn(4, 9))
    assert "the inputs resized" not in str(caught.value)


def test_good_arguments_still_forecast() -> None:
    assert forecast(_mlp(), X, batch=16, seq_len=None, dtype=torch.bfloat16, policy="cpu").peak_bytes > 0
    assert largest_batch_for(_mlp(), X, budget_bytes=1 << 20) > 16


class LayerDrop(torch.nn.Module):
    """Skips its layer at random, as Wav2Vec2's encoder does in training (`torch.rand([]) < layerdrop`)."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.rand([]) < 0.1:  # the value read
            return x.sum()
        return self.layer(x).square().sum()


def test_a_value_read_on_meta_names_the_line_that_reads_it() -> None:
    # before: "the forward reads a tensor's value (.item(), ...)" with no place; in Wav2Vec2 it is a LayerDrop line
    # deep in transformers
    with pytest.raises(TraceError, match=r"reads a tensor's value at \S*test_memory_api_arguments.py:\d+ "
                                         r"\(if torch.rand\(\[\]\) < 0.1:  # the value read\)"):
        forecast(LayerDrop(), X)
