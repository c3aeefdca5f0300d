"""The CPU's fused LSTM on meta (`tracing/memory/rnn.py`): oneDNN's workspace layout against the real kernel, and
the whole step counted on meta against PyTorch's MemTracker on the real one, in float32 and bfloat16."""

from __future__ import annotations

import dataclasses
from typing import Any

import mem_zoo
import pytest
import torch
from mem_oracle import StepSpec, memtracker_peak
from torch import nn

from graphviz_app.memory import forecast
from graphviz_app.tracing.memory.rnn import fused_lstm_dtypes, lstm_workspace_bytes

needs_onednn = pytest.mark.skipif(not fused_lstm_dtypes(), reason="needs torch built with oneDNN: the CPU's fused LSTM")
needs_bf16 = pytest.mark.skipif(torch.bfloat16 not in fused_lstm_dtypes(),
                                reason="needs a CPU with oneDNN's bfloat16 kernels (AVX-512 or AVX2-VNNI-2)")
DTYPES = [pytest.param(torch.float32, marks=needs_onednn, id="float32"),
          pytest.param(torch.bfloat16, marks=needs_bf16, id="bfloat16")]


def _real_workspace(steps: int, batch: int, inputs: int, hidden: int, dtype: torch.dtype) -> int:
    """The bytes of the workspace torch's CPU kernel returns for one layer (its fourth output), grad mode on."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(steps, batch, inputs, generator=g).to(dtype)
    w = [torch.randn(*shape, generator=g).to(dtype) for shape in ((4 * hidden, inputs), (4 * hidden, hidden),
                                                                    (4 * hidden,), (4 * hidden,))]
    h = torch.zeros(batch, hidden, dtype=dtype)
    with torch.enable_grad():
        out = torch.ops.aten.mkldnn_rnn_layer(x, *w, h, h.clone(), False, [], 2, hidden, 1, True, False, False, True)
    return int(out[3].nbytes)


SHAPES = [  # steps, batch, input, hidden: batch 1, sizes on and off oneDNN's 64-byte and 256-element paddings
    (1, 1, 1, 1), (1, 1, 8, 8), (10, 16, 32, 64), (24, 1, 64, 64), (24, 8, 64, 64), (5, 8, 300, 200),
    (7, 3, 17, 33), (1, 8, 256, 256), (3, 1, 128, 64), (2, 5, 512, 128), (12, 1, 40, 96), (12, 8, 192, 96),
    (33, 2, 1000, 16), (4, 64, 31, 257), (64, 1, 250, 250), (9, 7, 100, 300),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("steps", "batch", "inputs", "hidden"), SHAPES)
def test_the_workspace_formula_is_what_the_cpu_kernel_allocates(steps: int, batch: int, inputs: int, hidden: int,
                                                                dtype: torch.dtype) -> None:
    assert lstm_workspace_bytes(steps, batch, inputs, hidden, dtype) == _real_workspace(
        steps, batch, inputs, hidden, dtype)


def test_the_bfloat16_workspace_by_hand() -> None:
    # 10 steps x 16 rows = 160 rows, 2 x 11 x 16 = 352 state rows (steps + 1, two layers' worth); every part on a
    # 4 KiB page. bfloat16 rows pad to 32 elements, float32 ones to 16, and 256 (4 x 64 gates) gets 32 more.
    gates = 160 * (256 + 32) * 2  # 92,160 -> 23 pages
    ht = 160 * 64 * 2  # 20,480: 5 pages
    states = cell = 352 * 64 * 2  # 45,056: 11 pages each
    diff = 352 * 64 * 4  # 90,112: 22 pages, three of them (layer, iteration and cell gradients, float32)
    assert -(-gates // 4096) == 23
    assert lstm_workspace_bytes(10, 16, 32, 64, torch.bfloat16) == 23 * 4096 + ht + states + cell + 3 * diff == 475_136


def test_a_dtype_the_fused_kernel_does_not_train_in_is_refused() -> None:
    with pytest.raises(ValueError, match=r"trains in float32 or bfloat16, got torch.float16"):
        lstm_workspace_bytes(4, 2, 8, 8, torch.float16)


class _Tagger(nn.Module):
    """An LSTM whose output and last cell state both reach the loss."""

    def __init__(self, **lstm: Any) -> None:
        super().__init__()
        self.lstm = nn.LSTM(**lstm)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, (_, c) = self.lstm(x)
        return out.square().mean() + c.sum()


LSTMS: dict[str, dict[str, Any]] = {
    "one layer": dict(input_size=16, hidden_size=32),
    "three layers": dict(input_size=40, hidden_size=96, num_layers=3),
    "no bias": dict(input_size=32, hidden_size=32, bias=False, num_layers=2),
    "batch first, wide": dict(input_size=300, hidden_size=256, batch_first=True),
    "two directions": dict(input_size=24, hidden_size=40, bidirectional=True, num_layers=2),
    "dropout between layers": dict(input_size=24, hidden_size=40, num_layers=3, dropout=0.3),
}


def _spec(lstm: dict[str, Any], autocast: torch.dtype | None) -> StepSpec:
    first = bool(lstm.get("batch_first"))

    def inputs(batch: int) -> tuple[tuple[torch.Tensor], dict[str, Any]]:
        shape = (batch, 12, lstm["input_size"]) if first else (12, batch, lstm["input_size"])
        return (torch.randn(*shape, generator=torch.Generator().manual_seed(batch)),), {}

    return StepSpec(lambda: _Tagger(**lstm), inputs, lambda out: out, autocast=autocast)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch", [1, 8])
@pytest.mark.parametrize("name", list(LSTMS))
def test_the_step_counted_on_meta_is_memtrackers_on_the_real_cpu_step(name: str, batch: int,
                                                                      dtype: torch.dtype) -> None:
    autocast = dtype if dtype is not torch.float32 else None
    spec = _spec(LSTMS[name], autocast)
    oracle = memtracker_peak(spec, batch).peak_bytes
    torch.manual_seed(0)
    (x,), _ = spec.inputs(batch)
    predicted = forecast(spec.build(), x, loss=spec.loss, dtype=dtype, policy="cpu")
    assert predicted.peak_bytes == oracle, name
    assert predicted.measured is not None  # the count on meta is the headline, not the replay's stand-in
    assert not any("step-by-step cell" in note for note in predicted.notes)


@needs_bf16
def test_a_model_cast_to_bfloat16_runs_its_fused_layers_in_bfloat16_on_meta() -> None:
    spec = dataclasses.replace(_spec(LSTMS["three layers"], None), prepare=lambda m: m.to(torch.bfloat16),
                               inputs=lambda b: ((torch.randn(12, b, 40, generator=torch.Generator().manual_seed(b),
                                                              dtype=torch.bfloat16),), {}))
    torch.manual_seed(0)
    (x,), _ = spec.inputs(4)
    predicted = forecast(spec.build(), x.float(), loss=spec.loss, dtype=torch.bfloat16, cast=True, policy="cpu")
    workspaces = [n.tensor.bytes for n in predicted.graph.nodes if n.name == "result3" and n.tensor is not None]
    assert workspaces == [lstm_workspace_bytes(12, 4, 40 if i == 0 else 96, 96, torch.bfloat16) for i in range(3)]
    assert predicted.peak_bytes == memtracker_peak(spec, 4).peak_bytes


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_zoos_lstm_forecast_is_memtrackers_at_each_of_its_batches(dtype: torch.dtype) -> None:
    zoo = mem_zoo.by_name("lstm-lm")
    spec = dataclasses.replace(zoo.spec, autocast=dtype if dtype is not torch.float32 else None)
    for batch in zoo.batches:
        torch.manual_seed(0)
        args, kwargs = spec.inputs(batch)
        predicted = forecast(spec.build(), *args, loss=spec.loss, dtype=dtype, policy="cpu", **kwargs)
        assert predicted.peak_bytes == memtracker_peak(spec, batch).peak_bytes, f"batch {batch}"
