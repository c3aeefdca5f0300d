"""The gradient as a function of the inputs, differentiable again: what second order checks."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.func import vjp

from ._devices import is_out_of_memory
from ._inputs import call_outputs

__all__ = ["GradientFunction", "output_weights"]


def output_weights(
    sizes: dict[int, int], *, seed: int, dtype: torch.dtype, device: torch.device
) -> dict[int, torch.Tensor]:
    """The weights u_o the gradient is taken of, sum_o <u_o, f_o>: 1 for a scalar output.

    Seeded positive random weights otherwise (as torch's gradgradcheck takes random
    grad_outputs), so every output element counts and the runs repeat exactly.
    """
    gen = torch.Generator().manual_seed(seed + 1)
    weights = {}
    for o, m in sizes.items():
        u = torch.ones(m, dtype=torch.float64) if m == 1 else torch.rand(m, generator=gen, dtype=torch.float64) + 0.5
        weights[o] = u.to(device=device, dtype=dtype)
    return weights


@dataclass(slots=True)
class GradientFunction:
    """G(*args) = the gradients of sum_o <u_o, f_o(args)> by each differentiated input.

    Returns one tensor per differentiated input, in `diff` order, and stays
    differentiable: through `torch.func.vjp` when fn allows it (so it can be
    vmapped and differentiated by torch.func), else through
    `torch.autograd.grad(..., create_graph=True)` on the recorded graph.
    """

    fn: Callable[..., Any]
    diff: tuple[int, ...]
    checked: tuple[int, ...]
    weights: dict[int, torch.Tensor]
    functorch: bool = True

    def __call__(self, *args: Any) -> tuple[torch.Tensor, ...]:
        if self.functorch:
            try:
                return self._functorch(args)
            except Exception as e:  # noqa: BLE001 - the graph path re-raises real bugs
                if is_out_of_memory(e):
                    raise
                self.functorch = False
        return self._graph(args)

    def _functorch(self, args: Sequence[Any]) -> tuple[torch.Tensor, ...]:
        def pure(*xs: torch.Tensor) -> tuple[torch.Tensor, ...]:
            call = list(args)
            for i, x in zip(self.diff, xs, strict=True):
                call[i] = x
            outs = call_outputs(self.fn, call)
            return tuple(outs[o] for o in self.checked)

        outs, pullback = vjp(pure, *[args[i] for i in self.diff])[:2]
        cotangents = tuple(
            self.weights[o].to(y.dtype).reshape(y.shape) for o, y in zip(self.checked, outs, strict=True)
        )
        return tuple(pullback(cotangents))

    def _graph(self, args: Sequence[Any]) -> tuple[torch.Tensor, ...]:
        call = list(args)
        with torch.enable_grad():
            for i in self.diff:
                x = call[i]
                if not x.requires_grad:
                    call[i] = x.detach().requires_grad_()
            outs = call_outputs(self.fn, call)
            ys = [outs[o] for o in self.checked if outs[o].requires_grad]
            us = [
                self.weights[o].to(outs[o].dtype).reshape(outs[o].shape) for o in self.checked if outs[o].requires_grad
            ]
            xs = [call[i] for i in self.diff]
            grads = (
                torch.autograd.grad(ys, xs, grad_outputs=us, create_graph=True, allow_unused=True)
                if ys
                else [None] * len(xs)
            )
        return tuple(torch.zeros_like(x) if g is None else g for x, g in zip(xs, grads, strict=True))
