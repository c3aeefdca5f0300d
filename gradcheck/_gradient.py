"""The gradient as a function of the inputs and output weights, differentiable again: what second order checks."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.func import vjp

from gradcheck._devices import is_out_of_memory
from gradcheck._inputs import call_outputs

__all__ = ["GradientFunction", "output_weights"]


def output_weights(
    shapes: dict[int, tuple[int, ...]], *, seed: int, dtype: torch.dtype, device: torch.device
) -> list[torch.Tensor]:
    """The weights u_o the gradient is taken of, sum_o <u_o, f_o>: 1 for a scalar output.

    Seeded positive random weights otherwise (as torch's gradgradcheck takes random
    grad_outputs), so every output element counts and the runs repeat exactly.
    One tensor per output, of its shape, in the order of `shapes`.
    """
    gen = torch.Generator().manual_seed(seed + 1)
    weights = []
    for shape in shapes.values():
        m = torch.Size(shape).numel()
        u = torch.ones(m, dtype=torch.float64) if m == 1 else torch.rand(m, generator=gen, dtype=torch.float64) + 0.5
        weights.append(u.reshape(shape).to(device=device, dtype=dtype))
    return weights


@dataclass(slots=True)
class GradientFunction:
    """G(*args, *u) = the gradients of sum_o <u_o, f_o(args)> by each differentiated input.

    Takes fn's `n_args` inputs followed by one weight tensor u_o per checked output,
    returns one tensor per differentiated input, in `diff` order, and stays
    differentiable in both: through `torch.func.vjp` when fn allows it (so it can
    be vmapped and differentiated by torch.func), else through
    `torch.autograd.grad(..., create_graph=True)` on the recorded graph.
    """

    fn: Callable[..., Any]
    n_args: int
    diff: tuple[int, ...]
    checked: tuple[int, ...]
    functorch: bool = True

    def __call__(self, *args: Any) -> tuple[torch.Tensor, ...]:
        inputs, weights = args[: self.n_args], args[self.n_args :]
        if self.functorch:
            try:
                return self._functorch(inputs, weights)
            except Exception as e:  # noqa: BLE001 - the graph path re-raises real bugs
                if is_out_of_memory(e):
                    raise
                self.functorch = False
        return self._graph(inputs, weights)

    def _functorch(self, args: Sequence[Any], weights: Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        def pure(*xs: torch.Tensor) -> tuple[torch.Tensor, ...]:
            call = list(args)
            for i, x in zip(self.diff, xs, strict=True):
                call[i] = x
            outs = call_outputs(self.fn, call)
            return tuple(outs[o] for o in self.checked)

        outs, pullback = vjp(pure, *[args[i] for i in self.diff])[:2]
        cotangents = tuple(u.to(y.dtype) for u, y in zip(weights, outs, strict=True))
        return tuple(pullback(cotangents))

    def _graph(self, args: Sequence[Any], weights: Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        call = list(args)
        with torch.enable_grad():
            for i in self.diff:
                if not call[i].requires_grad:
                    call[i] = call[i].detach().requires_grad_()
            outs = call_outputs(self.fn, call)
            live = [(outs[o], u) for o, u in zip(self.checked, weights, strict=True) if outs[o].requires_grad]
            xs = [call[i] for i in self.diff]
            if not live:
                return tuple(torch.zeros_like(x) for x in xs)
            grads = torch.autograd.grad(
                [y for y, _ in live],
                xs,
                grad_outputs=[u.to(y.dtype) for y, u in live],
                create_graph=True,
                allow_unused=True,
            )
        return tuple(torch.zeros_like(x) if g is None else g for x, g in zip(xs, grads, strict=True))
