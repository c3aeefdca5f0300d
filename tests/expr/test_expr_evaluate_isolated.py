"""The library's evaluate() keeps the time limit inside one long operation, and still returns live results."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from waiting import wait_until

from graphviz_app import trace
from graphviz_app.expr import ExprError, Limits, evaluate, rehearsal
from graphviz_app.runner import HARD_GRACE_S, RunnerError, running_shared

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the worker tests use POSIX processes")

# One cdist at p=3 over 9·10^9 distance terms: far longer than its limit on any machine (about 80 s
# on this project's 2-core one). These limits let it past the costs, as if nobody had costed it.
LONG_OP = "a = torch.randn(3000, 1000)\ntorch.cdist(a, a, p=3).sum()"
LIMITS = Limits(max_seconds=1.0, max_multiply_adds=10**12, max_tensor_elements=2 * 10**7, max_total_bytes=10**9)
ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ("import os\nfrom graphviz_app.expr import evaluate, rehearsal\n"
          "ev = evaluate('x = torch.arange(3., requires_grad=True)\\n((x+2)**2+3).mean()')\n"
          "print(rehearsal.runner().run(os.getpid), round(ev.output.item(), 4))\n")
PROGRAM = ("torch.manual_seed(0)\nlin = nn.Linear(3, 2)\nx = torch.randn(4, 3, requires_grad=True)\n"
           "h = lin(x).relu()\n(h * x[:, :2]).sum()")


@pytest.fixture(scope="module")
def warm() -> Iterator[None]:
    """The process's worker started once, so timings are the program's, not a cold start; stopped after."""
    evaluate("torch.ones(2).sum()")
    yield
    rehearsal.close()


def _evaluates_without_a_runner() -> bool:
    """A job: evaluate() inside a worker, then whether that worker started a runner of its own."""
    return evaluate("torch.ones(2).sum()").output.item() == 2.0 and not running_shared()


def _alive(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat")
    if stat.parent.parent.exists():  # Linux: a zombie is not running either
        try:
            return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.slow  # runs into the program's 1 s limit and the 2 s grace
def test_one_long_uncosted_op_is_stopped_at_the_limit(warm: None) -> None:
    start = time.monotonic()
    with pytest.raises(ExprError, match=r"time limit of 1 s \(Limits\.max_seconds\) and was stopped inside one "
                                        r"operation.*use smaller tensors") as info:
        evaluate(LONG_OP, limits=LIMITS)
    elapsed = time.monotonic() - start
    assert info.value.kind == "time"
    assert not getattr(info.value, "__notes__", None), "the worker's traceback is no help to a person"
    # The limit, the grace, and a margin for a busy machine: far below the op's own time.
    assert elapsed < LIMITS.max_seconds + HARD_GRACE_S + 20
    assert evaluate("torch.ones(2).sum()").output.item() == 2.0  # a fresh worker took its place


def test_a_normal_program_gives_the_same_live_result_as_in_process(warm: None) -> None:
    guarded, alone = evaluate(PROGRAM), evaluate(PROGRAM, isolated=False)
    assert torch.equal(guarded.output, alone.output)
    assert guarded.output.grad_fn is not None and type(guarded.output.grad_fn) is type(alone.output.grad_fn)
    assert list(guarded.variables) == list(alone.variables) == ["x", "h"]
    assert all(torch.equal(guarded.variables[n], alone.variables[n]) for n in alone.variables)
    assert guarded.model is not None
    graphs = [trace(ev.output, ev.params, names=ev.variables).to_json() for ev in (guarded, alone)]
    assert graphs[0] == graphs[1]


def test_the_programs_own_errors_come_from_this_process_with_their_position(warm: None) -> None:
    with pytest.raises(ExprError, match=r"the shapes do not match") as info:
        evaluate("a = torch.ones(2)\nb = torch.ones(3)\na + b")
    assert (info.value.kind, info.value.line, info.value.col) == ("shape", 3, 1)
    assert not getattr(info.value, "__notes__", None)


def test_a_program_past_its_limit_between_ops_is_stopped_in_the_worker_with_its_line(warm: None) -> None:
    # A thousand ops of a few ms each: the clock between them stops the program.
    program = "a = torch.randn(5000000)\nfor i in range(1000):\n    b = a.median() * a[0]\nb"
    limits = Limits(max_seconds=1.0)
    start = time.monotonic()
    with pytest.raises(ExprError, match=r"ran longer than 1 s \(Limits\.max_seconds\)") as info:
        evaluate(program, limits=limits)
    assert info.value.kind == "time" and info.value.line == 3
    assert time.monotonic() - start < limits.max_seconds + HARD_GRACE_S + 20


def test_inside_a_worker_evaluate_runs_in_place(warm: None) -> None:
    # The worker's jobs have their own hard deadline: evaluate() there never starts a worker of its own.
    ran_in_place = rehearsal.runner().run(_evaluates_without_a_runner, time_limit=60)
    assert ran_in_place


def test_no_worker_is_left_behind_once_closed() -> None:
    assert evaluate("torch.ones(3).sum()").output.item() == 3.0
    runner = rehearsal.runner()
    pid = runner.run(os.getpid)
    assert pid != os.getpid() and _alive(pid)
    rehearsal.close()
    wait_until(lambda: not _alive(pid), timeout=30, what="the evaluate() worker ending")
    with pytest.raises(RunnerError, match="closed"):
        runner.run(os.getpid)
    assert rehearsal.runner() is not runner  # a later call starts afresh
    rehearsal.close()


@pytest.mark.slow  # a fresh interpreter imports torch and starts the worker
def test_a_script_that_never_closes_the_runner_exits_and_leaves_no_worker() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    pid, value = done.stdout.split()
    assert value == "12.6667"
    wait_until(lambda: not _alive(int(pid)), timeout=30, what="the script's evaluate() worker ending at exit")
