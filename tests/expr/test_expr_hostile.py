"""Hostile input: nothing outside the allow-list runs, every refusal names its problem."""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from expr_seed import SEED_PROGRAM, SEED_VALUE
from hostile import corpus
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graphviz_app.expr import ExprError, Limits, evaluate

CANARY = Path(tempfile.mkdtemp(prefix="expr-canary-")) / "canary"
LIMITS = Limits(max_seconds=5.0)
PRELUDE = "x = torch.ones(3)\n"
CASES = corpus()

# Benign programs touching the same machinery (meta shape checks, error
# translation), so torch's own lazy imports happen before the baseline.
_WARM_UP = [
    SEED_PROGRAM,
    "x = torch.ones(3)\n"
    "F.interpolate(torch.ones(1, 1, 2), scale_factor=2.0).sum() + torch.cdist(x[None], x[None]).sum()",
    "x = torch.ones(3)\nF.one_hot(torch.arange(3), 3).sum() + F.pad(x, (1, 0)).sum() + torch.kron(x, x).sum()",
    "x = torch.ones(3)\ntorch.block_diag(x[None], x[None]).sum() + torch.cartesian_prod(x, x).sum() + x.diag().sum()",
    "x = torch.ones(3)\n"
    "x.tile(2).sum() + x.repeat(2).sum() + x.outer(x).sum() + x.new_zeros(2).sum() + x[[0, 1]].sum()",
    "x = torch.ones(3)\ntorch.randperm(3).sum() + torch.randint(0, 2, (3,)).sum() + torch.linspace(0, 1, 3).sum()",
    "x = torch.ones(3)\n"
    "torch.eye(2).sum() + torch.full((2,), 1.0).sum() + torch.stack([x, x]).sum() + x.expand(2, 3).sum()",
]
_FAILING_WARM_UP = ["torch.tensor('abc')", "torch.ones(2) + torch.ones(3)", "x = torch.ones(2, 3)\nx.reshape(4)",
                    "2.0**99999", "torch.ones(2) if torch.ones(2) else 1", "x = torch.ones(3)\nx.to('meta')"]


@pytest.fixture(scope="module")
def modules_before() -> Iterator[set[str]]:
    for source in _WARM_UP:
        evaluate(source)
    for source in _FAILING_WARM_UP:
        with pytest.raises(ExprError):
            evaluate(source)
    yield set(sys.modules)
    shutil.rmtree(CANARY.parent, ignore_errors=True)


_HARNESS = ("hypothesis", "_hypothesis", "_pytest", "pytest", "pluggy", "sortedcontainers", "attr")


def _check_still_safe(modules_before: set[str]) -> None:
    assert not CANARY.exists(), "a hostile program created the canary file"
    new = {m for m in set(sys.modules) - modules_before if m.split(".")[0] not in _HARNESS}
    assert new == set(), "a hostile program imported a module"
    assert evaluate(SEED_PROGRAM).output.item() == pytest.approx(SEED_VALUE), "the evaluator broke"


def test_corpus_has_at_least_200_cases() -> None:
    assert len(CASES) >= 200
    assert len({source for source, _ in CASES}) == len(CASES)


@pytest.mark.parametrize(("source", "message"), CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_hostile_case_is_refused_with_a_message_naming_the_problem(
    source: str, message: str | None, modules_before: set[str]
) -> None:
    program = PRELUDE + source.replace("{canary}", str(CANARY))
    if message is None:  # a case that looks hostile but is allowed, and stays checked
        assert isinstance(evaluate(program, limits=LIMITS).output, torch.Tensor)
    else:
        with pytest.raises(ExprError) as info:
            evaluate(program, limits=LIMITS)
        err = info.value
        assert re.search(message, err.message), f"{err.message!r} does not match {message!r}"
        assert "\n" not in str(err)
    _check_still_safe(modules_before)


_NAMES = ["x", "torch", "F", "custom", "os", "open", "__import__", "getattr", "eval", "y", "_",
          "__builtins__", "range", "int", "len", "sys", "np"]
_ATTRS = ["T", "shape", "sum", "exp", "__class__", "__bases__", "__subclasses__", "load", "save",
          "system", "nn", "functional", "relu", "cuda", "to", "numpy", "__globals__", "format",
          "mro", "data", "grad_fn", "storage", "__dict__", "ones", "randn", "float32", "dtype"]
_LITERALS = ["1", "2.5", "'s'", "10**10", "-1", "[1, 2]", "()", "None", "'{canary}'", "3e10",
             "'cuda'", "True", "...", "1j"]


def _expressions() -> st.SearchStrategy[str]:
    leaf = st.sampled_from(_NAMES + _LITERALS)

    def grow(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.builds(lambda e, a: f"{e}.{a}", inner, st.sampled_from(_ATTRS)),
            st.builds(lambda e, args: f"{e}({', '.join(args)})", inner, st.lists(inner, max_size=3)),
            st.builds(lambda e, i: f"{e}[{i}]", inner, inner),
            st.builds(lambda a, op, b: f"({a} {op} {b})", inner,
                      st.sampled_from(["+", "*", "**", "@", "-", "/", "==", "&", "%"]), inner),
            st.builds(lambda e: f"-{e}", inner),
            st.builds(lambda e, k, v: f"{e}({k}={v})", inner,
                      st.sampled_from(["dtype", "device", "dim", "out"]), inner),
        )

    return st.recursive(leaf, grow, max_leaves=12)


def _programs() -> st.SearchStrategy[str]:
    statement = st.builds(lambda n, e: f"{n} = {e}", st.sampled_from(["y", "z", "w"]), _expressions())
    loop = st.builds(lambda e: f"for i in range(3):\n    y = {e}", _expressions())
    return st.builds(lambda pre, last: "\n".join([*pre, last]), st.lists(st.one_of(statement, loop), max_size=3),
                     _expressions())


@pytest.mark.filterwarnings("ignore::UserWarning")  # torch's own deprecation notes on odd programs
@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(source=_programs())
def test_random_programs_never_escape(source: str, modules_before: set[str]) -> None:
    program = PRELUDE + source.replace("{canary}", str(CANARY))
    try:
        ev = evaluate(program, limits=LIMITS)
    except ExprError as e:
        assert e.message.strip(), "every refusal carries a message"
    else:
        outputs = ev.output if isinstance(ev.output, tuple) else (ev.output,)
        assert all(isinstance(t, torch.Tensor) for t in outputs)
    _check_still_safe(modules_before)


@settings(max_examples=150, deadline=None)
@given(source=st.text(max_size=80))
def test_random_text_is_refused_or_evaluated_never_crashes(source: str, modules_before: set[str]) -> None:
    try:
        evaluate(PRELUDE + source, limits=LIMITS)
    except ExprError as e:
        assert e.message.strip()
    _check_still_safe(modules_before)
