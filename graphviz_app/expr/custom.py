"""Demonstration custom autograd Functions, reachable as `custom.<name>(x)`.

The language has no `def` or `class`, yet the gradient checker's gallery
needs a hand-written backward, right and wrong. These are them:

- ``custom.square(x)``: x**2 with the correct backward 2*x*grad.
- ``custom.square_wrong_backward(x)``: x**2 whose backward forgets the 2
  (returns x*grad), so a gradient check fails by a factor of 2.
- ``custom.cube(x)``: x**3 with the correct backward 3*x**2*grad.
- ``custom.cube_wrong_backward(x)``: x**3 whose backward returns
  2*x**2*grad (the exponent's 3 replaced by 2).

They use the `setup_context` style with ``generate_vmap_rule = True`` so
`torch.func.vmap` (used by fast gradient checks) works through them. Each has a
right ``jvp``, so forward mode (``check --fwd``) works through them and, for the
wrong ones, names reverse mode as the side that is wrong.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["square", "square_wrong_backward", "cube", "cube_wrong_backward", "FUNCTIONS"]


class _Square(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x: torch.Tensor) -> torch.Tensor:
        return x * x

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        ctx.save_for_backward(inputs[0])
        ctx.save_for_forward(inputs[0])

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        return 2 * x * grad

    @staticmethod
    def jvp(ctx: Any, tangent: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        return 2 * x * tangent  # right in every variant: only the backward is wrong



class _SquareWrongBackward(_Square):
    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        return x * grad  # deliberately wrong: the factor 2 is missing


class _Cube(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x: torch.Tensor) -> torch.Tensor:
        return x * x * x

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        ctx.save_for_backward(inputs[0])
        ctx.save_for_forward(inputs[0])

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        return 3 * x * x * grad

    @staticmethod
    def jvp(ctx: Any, tangent: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        return 3 * x * x * tangent  # right in every variant: only the backward is wrong



class _CubeWrongBackward(_Cube):
    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        return 2 * x * x * grad  # deliberately wrong: 2 instead of 3


def square(x: torch.Tensor) -> torch.Tensor:
    """x**2 with a correct hand-written backward."""
    return _Square.apply(x)


def square_wrong_backward(x: torch.Tensor) -> torch.Tensor:
    """x**2 whose backward is off by a factor of 2 (returns x*grad)."""
    return _SquareWrongBackward.apply(x)


def cube(x: torch.Tensor) -> torch.Tensor:
    """x**3 with a correct hand-written backward."""
    return _Cube.apply(x)


def cube_wrong_backward(x: torch.Tensor) -> torch.Tensor:
    """x**3 whose backward returns 2*x**2*grad instead of 3*x**2*grad."""
    return _CubeWrongBackward.apply(x)


FUNCTIONS = {
    "square": square,
    "square_wrong_backward": square_wrong_backward,
    "cube": cube,
    "cube_wrong_backward": cube_wrong_backward,
}
