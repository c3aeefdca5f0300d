"""On a corpus of functions, check(...).passed agrees with torch.autograd.gradcheck."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from custom_functions import Cube, CubeForgotAPower

from gradcheck import check

D = torch.float64


def _t(*shape: int, seed: int = 0, low: float = -1.0, high: float = 1.0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return (torch.rand(*shape, generator=gen, dtype=D) * (high - low) + low).requires_grad_()


class _ExpNew(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x: torch.Tensor) -> torch.Tensor:
        return x.exp()

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        return grad * y


class _ExpNewWrong(_ExpNew):
    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        return grad * y.clamp(max=1.5)  # wrong where exp(x) > 1.5


def _noncontiguous_t() -> torch.Tensor:
    base = _t(4, 3, seed=7).detach()
    return base.t().requires_grad_()  # a (3, 4) view with strides (1, 3)


# id, fn, inputs factory, torch's verdict (so the corpus has both kinds)
CORPUS: list[tuple[str, Callable[..., Any], Callable[[], tuple[torch.Tensor, ...]], bool]] = [
    ("elementwise", lambda x: torch.sin(x) * torch.exp(x), lambda: (_t(5),), True),
    ("polynomial", lambda x: x**3 - 2 * x, lambda: (_t(2, 3),), True),
    ("sqrt-log", lambda x: torch.sqrt(x) + torch.log(x), lambda: (_t(4, low=0.5, high=2.0),), True),
    ("sum", lambda x: x.sum(), lambda: (_t(3, 4),), True),
    ("mean-dim", lambda x: x.mean(dim=1), lambda: (_t(3, 4),), True),
    ("prod", lambda x: x.prod(), lambda: (_t(5, low=0.5, high=1.5),), True),
    ("logsumexp", lambda x: torch.logsumexp(x, dim=0), lambda: (_t(4, 2),), True),
    ("cumsum", lambda x: x.cumsum(0), lambda: (_t(5),), True),
    ("matmul", lambda a, b: a @ b, lambda: (_t(2, 3, seed=1), _t(3, 4, seed=2)), True),
    ("tanh-Wx", lambda w, x: torch.tanh(w @ x), lambda: (_t(4, 3, seed=3), _t(3, seed=4)), True),
    ("softmax", lambda x: torch.softmax(x, dim=-1), lambda: (_t(2, 5),), True),
    ("log-softmax", lambda x: F.log_softmax(x, dim=0), lambda: (_t(6),), True),
    (
        "conv1d",
        lambda x, w: F.conv1d(x, w),
        lambda: (_t(1, 2, 6, seed=5), _t(3, 2, 3, seed=6)),
        True,
    ),
    (
        "conv2d",
        lambda x, w: F.conv2d(x, w, padding=1),
        lambda: (_t(1, 1, 4, 4, seed=8), _t(2, 1, 3, 3, seed=9)),
        True,
    ),
    (
        "layer-norm",
        lambda x, w, b: F.layer_norm(x, (4,), w, b),
        lambda: (_t(3, 4), _t(4, seed=1), _t(4, seed=2)),
        True,
    ),
    ("vector-norm", lambda x: torch.linalg.vector_norm(x), lambda: (_t(6),), True),
    ("frobenius-norm", lambda x: torch.linalg.matrix_norm(x), lambda: (_t(3, 3),), True),
    ("mse-loss", lambda x, y: F.mse_loss(x, y), lambda: (_t(5, seed=1), _t(5, seed=2)), True),
    (
        "cross-entropy-int-target",
        lambda x, t: F.cross_entropy(x, t),
        lambda: (_t(3, 4), torch.tensor([0, 3, 1])),
        True,
    ),
    ("multi-input", lambda x, y: x * y + y**2, lambda: (_t(3, seed=1), _t(3, seed=2)), True),
    (
        "multi-output",
        lambda x, y: (torch.sin(x), x * y.sum()),
        lambda: (_t(3, seed=1), _t(2, seed=2)),
        True,
    ),
    ("non-contiguous", lambda x: (x * x.sum(0)).tanh(), lambda: (_noncontiguous_t(),), True),
    ("strided-slice", lambda x: x[::2].exp(), lambda: (_t(7),), True),
    ("custom-old-right", Cube.apply, lambda: (_t(4),), True),
    ("custom-old-wrong", CubeForgotAPower.apply, lambda: (_t(4),), False),
    ("custom-new-right", _ExpNew.apply, lambda: (_t(4),), True),
    ("custom-new-wrong", _ExpNewWrong.apply, lambda: (_t(4, low=0.0, high=1.0),), False),
    (
        "relu-at-kink",
        torch.relu,
        lambda: (torch.tensor([0.0, 1.0, -1.0], dtype=D, requires_grad=True),),
        False,
    ),
    ("detach-bug", lambda x: x.detach() * x, lambda: (_t(3),), False),
]


@pytest.mark.parametrize(
    ("fn", "make", "torch_verdict"), [c[1:] for c in CORPUS], ids=[c[0] for c in CORPUS]
)
def test_verdict_matches_torch_gradcheck(
    fn: Callable[..., Any], make: Callable[[], Any], torch_verdict: bool
) -> None:
    inputs = make()
    theirs = torch.autograd.gradcheck(fn, inputs, raise_exception=False)
    ours = check(fn, inputs)

    assert theirs is torch_verdict  # the corpus table says what torch answers
    assert ours.passed is theirs, str(ours)


@pytest.mark.parametrize(
    ("fn", "make", "torch_verdict"), [c[1:] for c in CORPUS], ids=[c[0] for c in CORPUS]
)
def test_fast_mode_verdict_matches_torch_fast_mode(
    fn: Callable[..., Any], make: Callable[[], Any], torch_verdict: bool
) -> None:
    inputs = make()
    theirs = torch.autograd.gradcheck(fn, inputs, raise_exception=False, fast_mode=True)
    ours = check(fn, inputs, fast=True)

    assert ours.passed is theirs is torch_verdict, str(ours)
    assert all(p.numel == 1 for p in ours.pairs)


def test_corpus_is_big_and_mixed() -> None:
    verdicts = [c[3] for c in CORPUS]
    assert len(CORPUS) >= 20
    assert verdicts.count(False) >= 4 and verdicts.count(True) >= 16
