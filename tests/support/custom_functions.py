"""The custom `torch.autograd.Function`s the suites trace, draw and check, written once.

Old style (forward takes ctx) and new style (setup_context, vmap rules), right
and deliberately wrong backwards, jvps and double backwards: the core corpus,
the gradient-flow corpus and the gradient checker's tests all take them from here.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = [
    "BadBackward", "Cube", "CubeForgotAPower", "Doubled", "OldSquare", "ScaleSaveBoth", "ScaleSaveNone", "SinRightVmap",
    "SinWrongVmap", "Twice", "TwiceWrongByGrad", "TwiceWrongByX", "exp_function", "square_via",
]


# Tracing and gradient flow ------------------------------------------------------------------------


class ScaleSaveBoth(torch.autograd.Function):
    """x * w, saving both inputs with ctx.save_for_backward, as users write them (w may broadcast)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x, w = ctx.saved_tensors
        return grad * w, (grad * x).sum_to_size(w.shape)


class ScaleSaveNone(torch.autograd.Function):
    """x * w, saving x, a None and w (save_for_backward accepts None)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x, None, w)
        return x * w

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x, nothing, w = ctx.saved_tensors
        assert nothing is None
        return grad * w, grad * x


class Doubled(torch.autograd.Function):
    """2 x with a custom backward (right): an op torch's tracing and meta kernels know nothing of."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return x * 2

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        return grad * 2


class BadBackward(torch.autograd.Function):
    """A custom Function whose backward divides by zero."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return x * 2

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        return grad / torch.zeros_like(grad)


# Old style: forward takes ctx (no vmap rule) -------------------------------------------------------


class OldSquare(torch.autograd.Function):
    """x**2 with a right backward; keeps x on ctx for subclasses that add a jvp."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        ctx.x = x
        return x**2

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        return grad * 2 * x


class Cube(torch.autograd.Function):
    """x**3 with a right backward."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        return grad * 3 * x**2


class CubeForgotAPower(Cube):
    """x**3 whose backward says 3x instead of 3x**2."""

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        return grad * 3 * x  # forgot a power


# New style: setup_context, jvp and vmap rules -------------------------------------------------------


def exp_function(backward_factor: float, jvp_factor: float) -> type[torch.autograd.Function]:
    """exp as a new-style Function whose backward and jvp are scaled by the given factors."""

    class Exp(torch.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(x: torch.Tensor) -> torch.Tensor:
            return x.exp()

        @staticmethod
        def setup_context(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
            ctx.save_for_backward(output)
            ctx.save_for_forward(output)

        @staticmethod
        def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
            (y,) = ctx.saved_tensors
            return grad * y * backward_factor

        @staticmethod
        def jvp(ctx: Any, tangent: torch.Tensor) -> torch.Tensor:
            (y,) = ctx.saved_tensors
            return tangent * y * jvp_factor

    return Exp


class SinWrongVmap(torch.autograd.Function):
    """sin with a right backward and a custom vmap rule that doubles the values."""

    @staticmethod
    def forward(x: torch.Tensor) -> torch.Tensor:
        return x.sin()

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        return grad * x.cos()

    @staticmethod
    def vmap(info: Any, in_dims: tuple[Any, ...], x: torch.Tensor) -> tuple[torch.Tensor, Any]:
        return x.sin() * 2, in_dims[0]


class SinRightVmap(SinWrongVmap):
    """sin with a right backward and a right vmap rule."""

    @staticmethod
    def vmap(info: Any, in_dims: tuple[Any, ...], x: torch.Tensor) -> tuple[torch.Tensor, Any]:
        return x.sin(), in_dims[0]


# Second order: a double backward of our own ---------------------------------------------------------


class Twice(torch.autograd.Function):
    """2 g x with a custom backward: right values, and its own derivative right too."""

    factor = 2.0

    @staticmethod
    def forward(ctx: Any, g: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(g, x)
        return 2 * g * x

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        g, x = ctx.saved_tensors
        return grad * Twice.factor * x, grad * 2 * g


class TwiceWrongByGrad(Twice):
    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        g, x = ctx.saved_tensors
        return grad * 3 * x, grad * 2 * g  # d/dg of 2 g x is 2x, not 3x


class TwiceWrongByX(Twice):
    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        g, x = ctx.saved_tensors
        return grad * 2 * x, grad * 3 * g  # d/dx of 2 g x is 2g, not 3g


def square_via(inner: type[torch.autograd.Function]) -> type[torch.autograd.Function]:
    """x**2 whose backward (2 x g) goes through `inner`, so `inner`'s backward is its double backward."""

    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
            ctx.save_for_backward(x)
            return x**2

        @staticmethod
        def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
            (x,) = ctx.saved_tensors
            return inner.apply(grad, x)

    return Square
