"""Property: no program of integer arithmetic ends the process (each runs in an isolated worker)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from graphviz_app.expr import ExprError
from graphviz_app.expr.jobs import evaluate_job
from graphviz_app.expr.rehearsal import PRELOAD
from graphviz_app.runner import IsolatedRunner, RunnerError

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the worker tests use POSIX processes")

_DTYPES = {"int8": 8, "int16": 16, "int32": 32, "int64": 64, "uint8": 0}
_OPERATORS = ["+", "-", "*", "//", "%", "/", "**", "&", "|", "^", "==", "<"]
_CALLS = [
    "torch.div(a, b, rounding_mode='trunc')", "torch.div(a, b, rounding_mode='floor')", "torch.div(a, b)",
    "a.divide(b, rounding_mode='trunc')", "torch.floor_divide(a, b)", "torch.remainder(a, b)",
    "torch.fmod(a, b)", "a.fmod(b)", "torch.true_divide(a, b)", "torch.pow(a, b)", "torch.maximum(a, b)",
]


def _extremes(dtype: str) -> list[int]:
    bits = _DTYPES[dtype]
    if bits == 0:
        return [0, 1, 2, 255]
    low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    return [low, -1, 0, 1, high]  # where integer arithmetic overflows or traps


@st.composite
def _operand(draw: st.DrawFn, name: str, dtype: str) -> str:
    values = draw(st.lists(st.sampled_from(_extremes(dtype)), min_size=1, max_size=3))
    if draw(st.booleans()) and len(values) == 1:
        return f"{name} = {values[0]}"  # a plain Python number (min int64 cannot be written literally)
    # The smallest int64 has no literal: build it as (min + 1) - 1, as a person would.
    text = ", ".join(str(v + 1) if v == -(2**63) else str(v) for v in values)
    fix = " - torch.tensor([" + ", ".join("1" if v == -(2**63) else "0" for v in values) + "])" \
        if -(2**63) in values else ""
    return f"{name} = torch.tensor([{text}], dtype=torch.{dtype}){fix}"


@st.composite
def _program(draw: st.DrawFn) -> str:
    dtype = draw(st.sampled_from(sorted(_DTYPES)))
    other = dtype if draw(st.booleans()) else draw(st.sampled_from(sorted(_DTYPES)))
    a, b = draw(_operand("a", dtype)), draw(_operand("b", other))
    if draw(st.booleans()):
        last = f"a {draw(st.sampled_from(_OPERATORS))} b"
    else:
        last = draw(st.sampled_from(_CALLS))
    if draw(st.booleans()):
        last = f"c = a\nc {draw(st.sampled_from(['+=', '//=', '%=', '*=']))} b\nc"
    return f"{a}\n{b}\n{last}"


@pytest.fixture(scope="module")
def runner() -> Iterator[IsolatedRunner]:
    with IsolatedRunner(workers=1, max_workers=1, time_limit=60, memory_limit=1024**3, preload=PRELOAD) as r:
        r.warm_up()
        yield r


@pytest.mark.slow  # 300 programs, each through the worker
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(program=_program())
@example(program="a = torch.tensor([-2147483648], dtype=torch.int32)\nb = -1\ntorch.div(a, b, rounding_mode='trunc')")
@example(
    program="a = torch.tensor([-9223372036854775807]) - 1\nb = torch.tensor([-1])\na.divide(b, rounding_mode='trunc')"
)
@example(program="a = torch.tensor([-9223372036854775807, 0]) - 1\nb = torch.tensor([-1, 0])\nc = a\nc //= b\nc")
def test_integer_arithmetic_never_ends_the_process(runner: IsolatedRunner, program: str) -> None:
    try:
        result = runner.run(evaluate_job, program)
    except RunnerError as e:
        pytest.fail(f"{program!r} ended or stalled the worker: {e}")
    except ExprError as e:
        assert e.kind != "internal", f"{program!r} reached an internal error: {e}"
    else:
        assert result["output"], program
