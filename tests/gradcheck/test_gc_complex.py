"""Complex inputs and outputs, checked as real views with torch's gradcheck conventions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from gradcheck import Blame, check

C = torch.complex128


def _z(n: int = 3, seed: int = 0) -> torch.Tensor:
    return torch.randn(n, dtype=C, generator=torch.Generator().manual_seed(seed)).requires_grad_()


class _SquareNoConj(torch.autograd.Function):
    """z**2 whose backward forgets torch's conjugate: grad * 2z instead of grad * conj(2z)."""

    @staticmethod
    def forward(ctx: Any, z: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(z)
        return z * z

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (z,) = ctx.saved_tensors
        return grad * 2 * z


class _SquareConj(_SquareNoConj):
    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (z,) = ctx.saved_tensors
        return grad * (2 * z).conj()


CORPUS: list[tuple[str, Callable[..., Any], Callable[[], tuple[torch.Tensor, ...]]]] = [
    ("|z|^2, real output", lambda z: (z * z.conj()).real.sum(), lambda: (_z(),)),
    ("z^2, complex output", lambda z: z**2, lambda: (_z(),)),
    ("exp", torch.exp, lambda: (_z(),)),
    ("abs", torch.abs, lambda: (_z(),)),
    ("angle", torch.angle, lambda: (_z(),)),
    ("conj(z) sin(z), not holomorphic", lambda z: z.conj() * z.sin(), lambda: (_z(),)),
    ("complex matmul", lambda a, b: a @ b, lambda: (_z(4).reshape(2, 2), _z(4, seed=1).reshape(2, 2))),
    (
        "real in, complex out: fft",
        lambda x: torch.fft.fft(x),
        lambda: (torch.randn(4, dtype=torch.float64).requires_grad_(),),
    ),
    ("custom backward with the conjugate", _SquareConj.apply, lambda: (_z(),)),
    ("custom backward without the conjugate", _SquareNoConj.apply, lambda: (_z(),)),
]


@pytest.mark.parametrize(("fn", "make"), [c[1:] for c in CORPUS], ids=[c[0] for c in CORPUS])
def test_verdict_matches_torchs_gradcheck(fn: Callable[..., Any], make: Callable[[], tuple[torch.Tensor, ...]]) -> None:
    """Before: complex inputs were refused."""
    inputs = make()
    theirs = torch.autograd.gradcheck(fn, inputs, raise_exception=False)

    report = check(fn, inputs)

    assert report.passed is theirs, str(report)


def test_the_corpus_has_both_verdicts() -> None:
    verdicts = [torch.autograd.gradcheck(c[1], c[2](), raise_exception=False) for c in CORPUS]
    assert verdicts.count(False) >= 1 and verdicts.count(True) >= 8


def test_a_forgotten_conjugate_is_blamed_on_the_backward() -> None:
    report = check(_SquareNoConj.apply, _z())

    assert report.pair(0, 0).blame == Blame.AUTOGRAD


def test_a_hand_gradient_is_read_in_torchs_convention() -> None:
    # For real L = |z|^2 = x^2 + y^2, autograd's gradient is dL/dx + i dL/dy = 2z.
    z = _z()
    right = check(lambda z: (z * z.conj()).real.sum(), z, expected=lambda z: 2 * z)
    conjugated = check(lambda z: (z * z.conj()).real.sum(), z, expected=lambda z: 2 * z.conj())

    assert right.passed, str(right)
    assert not conjugated.passed and conjugated.pair(0, 0).blame == Blame.EXPECTED


def test_complex_inputs_and_outputs_are_named_in_the_notes_and_shapes() -> None:
    report = check(lambda z: z**2, _z())

    pair = report.pair(0, 0)
    assert (pair.output_shape, pair.input_shape) == ((3, 2), (3, 2))
    notes = "\n".join(report.notes)
    assert "input 0 (complex128) checked as real views" in notes
    assert "output 0 checked as two real outputs" in notes


def test_forward_mode_and_second_order_take_complex_inputs_too() -> None:
    z = _z()
    assert check(torch.exp, z, modes=("rev", "fwd")).passed
    assert check(lambda z: (z.exp() * z.conj()).real.sum(), z, order=2).passed


def test_complex_outputs_are_not_called_integer_or_boolean() -> None:
    report = check(lambda x: torch.polar(x, x), torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True))

    assert report.passed and "integer" not in str(report)
