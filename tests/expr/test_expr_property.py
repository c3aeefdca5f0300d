"""Property: random well-formed programs give exactly what the same code gives written in torch."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from graphviz_app.expr import custom, evaluate, to_function

Env = dict[str, torch.Tensor]
Term = tuple[str, Callable[[Env], torch.Tensor]]

_UNARY: list[tuple[str, Callable[[torch.Tensor], torch.Tensor]]] = [
    ("-({})", lambda a: -a),
    ("torch.sin({})", torch.sin),
    ("torch.cos({})", torch.cos),
    ("torch.tanh({})", torch.tanh),
    ("torch.sigmoid({})", torch.sigmoid),
    ("torch.relu({})", torch.relu),
    ("torch.abs({})", torch.abs),
    ("torch.exp({})", torch.exp),
    ("({}).sum()", lambda a: a.sum()),
    ("({}).mean()", lambda a: a.mean()),
    ("F.softplus({})", F.softplus),
    ("F.gelu({})", F.gelu),
    ("({}).clamp(min=-1.0, max=1.0)", lambda a: a.clamp(min=-1.0, max=1.0)),
    ("torch.sqrt(torch.abs({}))", lambda a: torch.sqrt(torch.abs(a))),
    ("({}) ** 2", lambda a: a**2),
    ("F.softmax({}, dim=-1)", lambda a: F.softmax(a, dim=-1)),
    ("torch.logsumexp({}, dim=-1)", lambda a: torch.logsumexp(a, dim=-1)),
    # The same Function the program calls: a * a would differ in the last bit of the
    # gradient (g*a + g*a against custom.square's 2*a*g), and the comparison is exact.
    ("custom.square({})", custom.square),
]
_BINARY: list[tuple[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]]] = [
    ("({}) + ({})", lambda a, b: a + b),
    ("({}) - ({})", lambda a, b: a - b),
    ("({}) * ({})", lambda a, b: a * b),
    ("({}) / ({})", lambda a, b: a / b),
    ("torch.maximum({}, {})", torch.maximum),
    ("torch.minimum({}, {})", torch.minimum),
    ("torch.where(({0}) > ({1}), {0}, {1})", lambda a, b: torch.where(a > b, a, b)),
    ("torch.atan2({}, {})", torch.atan2),
]
_SCALAR_OPS: list[tuple[str, Callable[[torch.Tensor, float], torch.Tensor]]] = [
    ("({}) + {}", lambda a, c: a + c),
    ("({}) * {}", lambda a, c: a * c),
    ("({}) - {}", lambda a, c: a - c),
    ("{1} / (({0}) ** 2 + 1)", lambda a, c: c / (a**2 + 1)),
]


def _leaf(name: str) -> Term:
    return name, lambda env: env[name]


def _unary(inner: Term, op: tuple[str, Callable[..., torch.Tensor]]) -> Term:
    text, fn = inner
    return op[0].format(text), lambda env: op[1](fn(env))


def _binary(left: Term, right: Term, op: tuple[str, Callable[..., torch.Tensor]]) -> Term:
    return op[0].format(left[0], right[0]), lambda env: op[1](left[1](env), right[1](env))


def _scalar(inner: Term, c: float, op: tuple[str, Callable[..., torch.Tensor]]) -> Term:
    return op[0].format(inner[0], repr(c)), lambda env: op[1](inner[1](env), c)


def _terms() -> st.SearchStrategy[Term]:
    leaves = st.sampled_from(["x", "y", "s"]).map(_leaf)
    constants = st.floats(-3, 3, allow_nan=False).map(lambda v: round(v, 3))

    def grow(inner: st.SearchStrategy[Term]) -> st.SearchStrategy[Term]:
        return st.one_of(
            st.builds(_unary, inner, st.sampled_from(_UNARY)),
            st.builds(_binary, inner, inner, st.sampled_from(_BINARY)),
            st.builds(_scalar, inner, constants, st.sampled_from(_SCALAR_OPS)),
        )

    return st.recursive(leaves, grow, max_leaves=10)


_VALUES = st.lists(st.floats(-3, 3, allow_nan=False), min_size=7, max_size=7)


def _program(values: list[float]) -> tuple[str, Env]:
    env = {
        "x": torch.tensor(values[:3], dtype=torch.float64),
        "y": torch.tensor(values[3:6], dtype=torch.float64),
        "s": torch.tensor(values[6], dtype=torch.float64),
    }
    lines = [f"{name} = torch.tensor({t.tolist()!r}, dtype=torch.float64)" for name, t in env.items()]
    return "\n".join(lines), env


@settings(max_examples=120, deadline=None)
@given(term=_terms(), values=_VALUES)
def test_random_expression_equals_torch_written_directly(term: Term, values: list[float]) -> None:
    prelude, env = _program(values)
    got = evaluate(f"{prelude}\n{term[0]}").output
    want = term[1](env)
    torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)


@settings(max_examples=40, deadline=None)
@given(term=_terms(), values=_VALUES)
def test_to_function_gives_the_same_gradient_as_torch(term: Term, values: list[float]) -> None:
    prelude, env = _program(values)
    # `+ (x * 0).sum()` on both sides keeps x in the graph when the term does not use it
    fn, (x,) = to_function(f"{prelude}\n({term[0]}).sum() + (x * 0).sum()", ["x"])
    x = x.clone().requires_grad_(True)
    (got,) = torch.autograd.grad(fn(x), x, allow_unused=True, materialize_grads=True)
    direct = x.detach().clone().requires_grad_(True)
    direct_out = term[1]({**env, "x": direct}).sum() + (direct * 0).sum()
    (want,) = torch.autograd.grad(direct_out, direct, allow_unused=True, materialize_grads=True)
    torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("source", ["x = torch.ones(3)\n(x * 2).sum()", "x = torch.ones(3)\ncustom.cube(x)"])
def test_same_program_twice_gives_identical_results(source: str) -> None:
    assert torch.equal(evaluate(source).output, evaluate(source).output)
