"""Programs that used to end the process (SIGFPE) or reach an internal error: now refused with a message."""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from expr_seed import SEED_PROGRAM, SEED_VALUE

from graphviz_app.expr import ExprError, evaluate
from graphviz_app.expr.jobs import evaluate_job
from graphviz_app.expr.rehearsal import PRELOAD
from graphviz_app.runner import IsolatedRunner, RunnerError

INT64_MIN = "(torch.tensor([-9223372036854775807]) - 1)"
INT32_MIN = "torch.tensor([-2147483648], dtype=torch.int32)"

# (program, what the refusal says): each of these killed the process with SIGFPE
# on at least one torch build, or divides an integer by zero.
DIVISIONS = [
    (f"torch.div({INT32_MIN}, -1, rounding_mode='trunc')", r"smallest int32 value \(-2147483648\) by -1"),
    (f"torch.div({INT64_MIN}, -1, rounding_mode='trunc')", r"smallest int64 value .* by -1.*use \.double\(\)"),
    (f"{INT32_MIN}.divide(-1, rounding_mode='trunc')", r"divide\(\.\.\.\) divides the smallest int32"),
    (f"torch.div({INT32_MIN}, torch.tensor([2, -1], dtype=torch.int32), rounding_mode='floor')", r"smallest int32"),
    (f"{INT64_MIN} // -1", r"// -1 divides the smallest int64"),
    (f"x = {INT64_MIN}\nx //= -1\nx", r"line 2, col 1: x // -1 divides the smallest int64"),
    (f"{INT64_MIN} % -1", r"% -1 divides the smallest int64"),
    (f"torch.remainder({INT64_MIN}, -1)", r"smallest int64"),
    (f"torch.fmod({INT32_MIN}, torch.tensor(-1, dtype=torch.int32))", r"smallest int32"),
    (f"torch.floor_divide({INT64_MIN}, -1)", r"smallest int64"),
    ("torch.tensor([5]) % 0", r"divides an integer tensor by zero"),
    ("torch.tensor([7, 8]).fmod(other=torch.tensor([0, 1]))", r"divides an integer tensor by zero"),
    ("torch.div(torch.tensor([7]), torch.tensor([0]), rounding_mode='trunc')", r"by zero"),
]

_SCRIPT = """
import json, sys
from graphviz_app.expr import ExprError, evaluate
out = []
for program in json.loads(sys.argv[1]):
    try:
        evaluate(program)
        out.append("ran")
    except ExprError as e:
        out.append(str(e))
print(json.dumps(out))
"""


def _env() -> dict[str, str]:
    root = str(Path(__file__).resolve().parents[2])
    return {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}


@pytest.mark.slow  # a process of its own: the division must not kill this one
def test_integer_division_that_traps_is_refused_and_the_process_lives() -> None:
    programs = [p for p, _ in DIVISIONS]
    done = subprocess.run([sys.executable, "-c", _SCRIPT, json.dumps(programs)], capture_output=True,
                          text=True, env=_env(), timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    messages = json.loads(done.stdout.strip().splitlines()[-1])
    for (program, pattern), message in zip(DIVISIONS, messages, strict=True):
        assert re.search(pattern, message), (program, message)


@pytest.mark.parametrize(
    ("program", "value"),
    [
        ("torch.div(torch.tensor([-7, 7]), 2, rounding_mode='trunc')", [-3, 3]),
        ("torch.tensor([-7, 7]) // -1", [7, -7]),
        (f"torch.div({INT32_MIN}, -1.0, rounding_mode='trunc')", [2147483648.0]),
        (f"{INT32_MIN} // torch.tensor([-1])", [2147483648]),  # computed in int64: no overflow
        ("torch.tensor([5.]) % 0", [float("nan")]),
    ],
)
def test_safe_integer_division_still_runs(program: str, value: list[float]) -> None:
    out = evaluate(program).output
    assert torch.equal(out, torch.tensor(value, dtype=out.dtype)) or torch.isnan(out).all()


@pytest.mark.slow  # the command line as a process of its own
def test_cli_render_refuses_the_trapping_division(tmp_path: Path) -> None:
    program = (
        f"x = torch.ones(1, requires_grad=True)\ny = torch.div({INT32_MIN}, -1, rounding_mode='trunc')\n(x * y).sum()"
    )
    done = subprocess.run(
        [sys.executable, "-m", "graphviz_app", "render", program, "-o", str(tmp_path / "g.dot")],
        capture_output=True, text=True, env=_env(), timeout=300,
    )
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "divides the smallest int32 value (-2147483648) by -1" in done.stderr
    assert "Floating point exception" not in done.stderr and "Traceback" not in done.stderr


@pytest.fixture(scope="module")
def runner() -> Iterator[IsolatedRunner]:
    with IsolatedRunner(workers=1, max_workers=2, time_limit=60, memory_limit=1024**3, preload=PRELOAD) as r:
        yield r


@pytest.mark.slow  # a worker killed by SIGFPE and a fresh one started
@pytest.mark.skipif(not hasattr(os, "fork"), reason="the worker tests use POSIX processes")
def test_worker_refuses_the_division_and_survives_a_raw_sigfpe(runner: IsolatedRunner) -> None:
    with pytest.raises(ExprError, match=r"divides the smallest int32") as info:
        runner.run(evaluate_job, f"torch.div({INT32_MIN}, -1, rounding_mode='trunc')")
    assert info.value.kind == "limit"
    # The same division called on torch directly kills the worker: a message, then a fresh worker.
    raw = functools.partial(torch.div, rounding_mode="trunc")
    with pytest.raises(RunnerError, match=r"killed by SIGFPE .*crashed inside the job.*fresh worker") as info:
        runner.run(raw, torch.tensor([-(2**31)], dtype=torch.int32), -1)
    assert info.value.kind == "crash"
    assert runner.run(evaluate_job, SEED_PROGRAM)["output"][0]["values"] == pytest.approx([SEED_VALUE])


@pytest.mark.parametrize(
    ("program", "message", "position"),
    [
        ("# only a comment\n   # and another\n", r"^the program has only comments: add an expression", None),
        ("for i in range(100000000000000000000):\n    y = 1\ntorch.ones(1)",
         r"the loop runs 100,000,000,000,000,000,000 times; the limit is 1,000", (1, 10)),
        ("n = 2**62\nfor i in range(-n, n):\n    y = 1\ntorch.ones(1)",
         r"the loops would run 9,223,372,036,854,775,808 iterations in all", (2, 10)),
        ("x = torch.ones(1)\ns = 'a\udcffb'\nx", r"lone surrogate character \(U\+DCFF\)", (2, 7)),
        ("x = torch.ones(1)  # \ud800 in a comment\nx", r"lone surrogate character \(U\+D800\)", (1, 22)),
    ],
)
def test_programs_that_reached_internal_errors_get_their_own_message(
    program: str, message: str, position: tuple[int, int] | None
) -> None:
    with pytest.raises(ExprError, match=message) as info:
        evaluate(program)
    assert info.value.kind != "internal"
    assert "nests too deeply" not in str(info.value)
    assert (info.value.line, info.value.col) == (position or (None, None))
    if info.value.excerpt is not None:
        info.value.excerpt.encode("utf-8")  # printable: the surrogate is not echoed back


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the worker tests use POSIX processes")
def test_one_jobs_manual_seed_does_not_fix_the_next_jobs_random_numbers() -> None:
    torch.manual_seed(0)
    first, second = torch.rand(3).tolist(), torch.rand(3).tolist()
    # One worker: the same process.
    with IsolatedRunner(workers=1, max_workers=1, time_limit=60, preload=PRELOAD) as one:
        seeded = one.run(evaluate_job, "torch.manual_seed(0)\ntorch.rand(3)")["output"][0]["values"]
        after = one.run(evaluate_job, "torch.rand(3)")["output"][0]["values"]
        again = one.run(evaluate_job, "torch.rand(3)")["output"][0]["values"]
    assert seeded == pytest.approx(first)  # a program's own seed still works
    assert after != pytest.approx(second)  # ... and stays with its job
    assert after != pytest.approx(again)
