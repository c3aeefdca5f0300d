"""Small programs whose gradients the suite checks, and the NaN/Inf trap programs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import torch
from custom_functions import BadBackward, ScaleSaveBoth

__all__ = ["Case", "CORPUS", "NONFINITE", "FINITE", "build"]


class Case(NamedTuple):
    outputs: Any
    params: dict[str, torch.Tensor]


def _seed() -> Case:
    x = torch.arange(3.0, requires_grad=True)
    return Case(((x + 2) ** 2 + 3).mean(), {"x": x})


def _mlp() -> Case:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    x = torch.randn(5, 4)
    return Case(net(x).pow(2).mean(), dict(net.named_parameters()))


def _softmax_xent() -> Case:
    torch.manual_seed(1)
    logits = torch.randn(4, 5, requires_grad=True)
    target = torch.tensor([0, 3, 1, 4])
    loss = torch.nn.functional.cross_entropy(torch.softmax(logits, -1).log() + 0, target)
    return Case(loss, {"logits": logits})


def _used_twice() -> Case:
    x = torch.tensor([1.0, -2.0, 3.0], requires_grad=True)
    h = x * 3
    return Case((h * h + h.sin()).sum(), {"x": x})


def _custom() -> Case:
    torch.manual_seed(2)
    x = torch.randn(3, 2, requires_grad=True)
    w = torch.randn(2, requires_grad=True)
    return Case(ScaleSaveBoth.apply(x.exp(), w).sum(), {"x": x, "w": w})


def _double_backward() -> Case:
    x = torch.tensor([0.5, 1.0, 2.0], requires_grad=True)
    (g,) = torch.autograd.grad((x**3).sum(), x, create_graph=True)
    return Case((g * x).sum(), {"x": x})


def _two_outputs() -> Case:
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    return Case(((x * 2).sum(), (x**2).mean(0)), {"x": x})


CORPUS: dict[str, Callable[[], Case]] = {
    "seed": _seed,
    "mlp": _mlp,
    "softmax_cross_entropy": _softmax_xent,
    "tensor_used_twice": _used_twice,
    "custom_function": _custom,
    "double_backward": _double_backward,
    "two_outputs": _two_outputs,
}


def build(name: str) -> Case:
    return CORPUS[name]()


def _x(*values: float) -> torch.Tensor:
    return torch.tensor(values, requires_grad=True)


def _where_log() -> Case:
    x = _x(0.0, 1.0)
    return Case(torch.where(x > 0, torch.log(x), 0).sum(), {"x": x})


def _exp_overflow() -> Case:
    x = _x(100.0, 1.0)
    return Case((torch.exp(x) * 0).sum(), {"x": x})


def _one_sample_std() -> Case:
    x = _x(3.0)
    return Case(x.std() + x.sum(), {"x": x})


def _masked_softmax_all_masked() -> Case:
    x = _x(1.0, 2.0)
    logits = x.masked_fill(torch.tensor([True, True]), float("-inf"))
    return Case(torch.softmax(logits, 0)[0], {"x": x})


# program -> (graph, the op where the gradient first becomes NaN/Inf,
#             whether its forward value was already non-finite)
NONFINITE: dict[str, tuple[Callable[[], Case], str, bool]] = {
    "where(x > 0, log(x), 0) at 0": (_where_log, "LogBackward0", True),
    "sqrt(x) at 0": (lambda: (lambda x: Case(x.sqrt().sum(), {"x": x}))(_x(0.0, 4.0)), "SqrtBackward0", False),
    "x / y at y = 0": (
        lambda: (lambda x, y: Case((x / y).sum(), {"x": x, "y": y}))(_x(1.0), _x(0.0)), "DivBackward0", True
    ),
    "x ** 0.5 at 0": (lambda: (lambda x: Case((x**0.5).sum(), {"x": x}))(_x(0.0, 1.0)), "PowBackward0", False),
    "acos(x) at 1": (lambda: (lambda x: Case(x.acos().sum(), {"x": x}))(_x(1.0, 0.0)), "AcosBackward0", False),
    "atanh(x) at 1": (lambda: (lambda x: Case(x.atanh().sum(), {"x": x}))(_x(1.0)), "AtanhBackward0", True),
    "rsqrt(x) at 0": (lambda: (lambda x: Case(x.rsqrt().mean(), {"x": x}))(_x(0.0, 1.0)), "RsqrtBackward0", True),
    "exp(100) * 0 in float32": (_exp_overflow, "ExpBackward0", True),
    "std of one sample": (_one_sample_std, "StdBackward0", True),
    "custom Function dividing by zero": (
        lambda: (lambda x: Case(BadBackward.apply(x).sum(), {"x": x}))(_x(1.0)), "BadBackwardBackward", False
    ),
    "softmax with every logit masked": (_masked_softmax_all_masked, "SoftmaxBackward0", True),
}


def _safe_where() -> Case:
    x = _x(0.0, 2.0)
    return Case(torch.where(x > 0, x, 1.0).log().sum(), {"x": x})


def _masked_softmax() -> Case:
    x = _x(1.0, 2.0, 3.0)
    logits = x.masked_fill(torch.tensor([False, True, False]), float("-inf"))
    return Case((torch.softmax(logits, 0) * torch.tensor([1.0, 2.0, 3.0])).sum(), {"x": x})


# Programs that look like they should blow up in backward and do not.
FINITE: dict[str, Callable[[], Case]] = {
    "norm of a zero vector": lambda: (lambda x: Case(torch.linalg.vector_norm(x), {"x": x}))(_x(0.0, 0.0)),
    "abs and relu at 0": lambda: (lambda x: Case((x.abs() + x.relu()).sum(), {"x": x}))(_x(0.0, 0.0)),
    "log of where(x > 0, x, 1) at 0 (the safe where)": _safe_where,
    "softmax over a -inf masked logit": _masked_softmax,
    "logsumexp with a -inf entry": lambda: (
        lambda x: Case(torch.logsumexp(x.masked_fill(torch.tensor([True, False]), float("-inf")), 0), {"x": x})
    )(_x(5.0, 1.0)),
}
