"""Sizing a module call on meta: torch's flop counts, and copies of one layer sized once."""

from __future__ import annotations

import copy
import warnings

import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from graphviz_app.expr.guards import to_meta
from graphviz_app.expr.meta_cost import CallCost, size_once


def _measure(module: nn.Module, *inputs: torch.Tensor) -> tuple[CallCost, object]:
    cost = CallCost()
    with torch.no_grad(), cost:
        out = module(*[to_meta(x) for x in inputs])
    return cost, out


def _torch_flops(module: nn.Module, *inputs: torch.Tensor) -> int:
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        module(*[to_meta(x) for x in inputs])
    return counter.get_total_flops()


def _encoder(layers: int, *, marked: bool) -> nn.TransformerEncoder:
    layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True, device="meta")
    if marked:
        size_once(layer)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the inference fast path is off: beside the point
        return nn.TransformerEncoder(layer, layers)


CASES = {
    "linear": (lambda: nn.Linear(8, 4, device="meta"), [(3, 8)]),
    "conv2d": (lambda: nn.Conv2d(3, 6, 3, padding=1, device="meta"), [(2, 3, 10, 10)]),
    "lstm": (lambda: nn.LSTM(5, 7, num_layers=2, batch_first=True, device="meta"), [(2, 4, 5)]),
    "attention": (lambda: nn.MultiheadAttention(16, 4, batch_first=True, device="meta"),
                  [(2, 5, 16), (2, 5, 16), (2, 5, 16)]),
    "encoder layer": (lambda: nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True, device="meta"),
                      [(2, 5, 16)]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_flops_match_torchs_flop_counter(name: str) -> None:
    make, shapes = CASES[name]
    module = make()
    inputs = [torch.ones(s) for s in shapes]
    cost, _ = _measure(module, *inputs)
    assert cost.flops == _torch_flops(module, *inputs) > 0


def test_copies_of_one_layer_cost_what_running_each_copy_costs() -> None:
    x = torch.ones(2, 5, 16)
    once, out_once = _measure(_encoder(12, marked=True), x)
    every, out_every = _measure(_encoder(12, marked=False), x)
    assert (once.flops, once.nbytes, once.largest) == (every.flops, every.nbytes, every.largest)
    assert once.flops == _torch_flops(_encoder(12, marked=False), x)
    assert out_once.shape == out_every.shape == (2, 5, 16) and out_once.device.type == "meta"


def test_a_marked_layer_runs_once_per_measurement_and_input_shape() -> None:
    layer = nn.Linear(4, 4, device="meta")
    size_once(layer)
    copies = [copy.deepcopy(layer) for _ in range(3)]
    runs = []
    for m in copies:
        m.register_forward_pre_hook(lambda mod, args: runs.append(tuple(args[0].shape)))
    seq = nn.Sequential(*copies)
    cost, out = _measure(seq, torch.ones(2, 4))
    # Hooks run in __call__, around forward: each copy is called; the body ran for one only.
    assert runs == [(2, 4)] * 3
    assert cost.flops == 3 * 2 * 2 * 4 * 4 and out.shape == (2, 4)
    cost2, _ = _measure(copies[0], torch.ones(5, 4))
    assert cost2.flops == 2 * 5 * 4 * 4  # a new measurement, a new shape: measured again


def test_a_marked_module_runs_normally_outside_a_measurement() -> None:
    layer = nn.Linear(2, 3)
    size_once(layer)
    out = layer(torch.ones(1, 2))
    assert out.shape == (1, 3) and out.grad_fn is not None


def test_different_input_shapes_are_measured_separately() -> None:
    layer = nn.Linear(4, 4, device="meta")
    size_once(layer)
    cost = CallCost()
    with torch.no_grad(), cost:
        layer(torch.empty(2, 4, device="meta"))
        layer(torch.empty(7, 4, device="meta"))
    assert cost.flops == 2 * (2 + 7) * 4 * 4
    assert cost.largest == 7 * 4
