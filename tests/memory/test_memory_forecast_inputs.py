"""What a forecast runs on: tensors a loss captures move with the step; an op without a meta kernel is named."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from graphviz_app.errors import TraceError
from graphviz_app.memory import forecast, measure


@pytest.mark.parametrize("policy", ["cpu", "cuda"], ids=["cpu-kernels", "gpu-kernels-on-meta"])
def test_a_target_captured_by_the_loss_moves_and_resizes_with_the_step(policy: str) -> None:
    model = torch.nn.Linear(8, 4)
    target = torch.randint(0, 4, (16,))

    def make_loss(t: torch.Tensor):  # noqa: ANN202 - a closure, as people write one
        return lambda out: F.cross_entropy(out, t)

    real = measure(model, torch.randn(64, 8), loss=make_loss(torch.randint(0, 4, (64,)))).measured.peak_bytes
    assert forecast(model, torch.randn(16, 8), loss=make_loss(target), batch=64, policy=policy).peak_bytes == real
    assert target.device.type == "cpu" and target.shape == (16,)  # the person's tensor is left as it was


@torch.library.custom_op("gvtest_memory::doubled", mutates_args=())
def doubled(x: torch.Tensor) -> torch.Tensor:
    return x * 2


class Doubling(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return doubled(x * self.w).sum()


def test_an_op_without_a_meta_kernel_is_named_without_the_item_hint() -> None:
    with pytest.raises(TraceError, match=r"gvtest_memory::doubled.*forecast on the real device") as caught:
        forecast(Doubling(), torch.ones(3, 4), policy="cuda")
    assert ".item()" not in str(caught.value)
