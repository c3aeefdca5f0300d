"""What the page calls: each job run in the isolated worker, every error turned into a Failure."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, Protocol

from ..drawing.gradient_style import default_coloring
from ..drawing.renderer import export
from ..expr import ExprError, IsolatedRunner, JobRef, validate
from ..model import Graph
from .memory_view import MemoryPanel
from .results import Analysis, CheckModes, Drawn, Failure, GradientCheck, Tolerances
from .urlstate import CheckInput, Options

__all__ = [
    "JobRunner",
    "TIME_LIMIT_S",
    "MEMORY_LIMIT_BYTES",
    "make_runner",
    "devices",
    "analyze",
    "check_gradient",
    "png",
    "dot",
    "draw",
    "memory",
    "syntax_problem",
    "JOBS",
]

# A program gets this long and this much memory in its worker; then it is
# stopped and the person told so. Override with GRAPHVIZ_APP_TIME_LIMIT (s).
TIME_LIMIT_S = float(os.environ.get("GRAPHVIZ_APP_TIME_LIMIT", "15"))
MEMORY_LIMIT_BYTES = 2 * 1024**3
_WORKER = "graphviz_app.web.worker"
_PRELOAD = ("torch", "graphviz_app.expr.api", "graphviz_app.tracing.tracer", "graphviz_app.drawing.renderer",
            "gradcheck.checker", f"{_WORKER}.jobs")

# The jobs, named: this process never imports the worker side (it imports torch).
DEVICES_JOB = JobRef(f"{_WORKER}.jobs", "devices_job")
ANALYSIS_JOB = JobRef(f"{_WORKER}.jobs", "analysis_job")
CHECK_JOB = JobRef(f"{_WORKER}.jobs", "check_job")
PNG_JOB = JobRef(f"{_WORKER}.jobs", "png_job")
DRAW_JOB = JobRef(f"{_WORKER}.drawing", "draw_job")
MEMORY_JOB = JobRef(f"{_WORKER}.memory", "memory_job")
JOBS = (DEVICES_JOB, ANALYSIS_JOB, CHECK_JOB, PNG_JOB, DRAW_JOB, MEMORY_JOB)


class JobRunner(Protocol):
    """What runs the page's jobs: an `IsolatedRunner`, or one session's share of a `FairRunner`."""

    @property
    def time_limit(self) -> float: ...

    def run(self, job: Callable[..., Any] | JobRef, *args: Any) -> Any: ...


def make_runner(*, workers: int = 2, max_workers: int = 4, time_limit: float = TIME_LIMIT_S) -> IsolatedRunner:
    """The pool of warm worker processes the page's jobs run in.

    Args:
        workers: kept warm; a hostile program ties up one until its time limit.
        max_workers: most at once; further requests wait for a free one.
        time_limit: seconds a job may run before its worker is killed.
    """
    return IsolatedRunner(
        workers=workers, max_workers=max_workers, time_limit=time_limit,
        memory_limit=MEMORY_LIMIT_BYTES, preload=_PRELOAD,
    )


def devices(runner: JobRunner) -> tuple[str, ...]:
    """cpu and each cuda:N the worker's torch sees (the server never loads torch)."""
    found = _call(runner, DEVICES_JOB)
    return ("cpu",) if isinstance(found, Failure) else found


def analyze(runner: JobRunner, program: str, options: Options) -> Analysis | Failure:
    """Evaluate, trace, draw and differentiate `program` under `options`."""
    return _call(runner, ANALYSIS_JOB, program, options, _budget(runner))


def check_gradient(
    runner: JobRunner, program: str, options: Options, check: CheckInput, tolerances: Tolerances,
    modes: CheckModes | None = None,
) -> GradientCheck | Failure:
    """Check the hand-derived gradient in `check` against autograd and finite differences.

    `modes` adds forward mode and second order, and says what a verified kink does.
    """
    if not check.wrt:
        return Failure("choose the variable the gradient is taken with respect to", kind="input")
    if not check.expected.strip():
        return Failure("type your hand-derived gradient, e.g. 2*(x+2)/3", kind="input")
    return _call(runner, CHECK_JOB, program, options, check.wrt, check.expected, tolerances, modes or CheckModes())


def png(runner: JobRunner, graph_json: str, rankdir: str) -> bytes | Failure:
    """The graph as PNG, laid out on demand in the worker."""
    return _call(runner, PNG_JOB, graph_json, rankdir, _budget(runner))


def dot(graph_json: str, rankdir: str) -> str:
    """The whole graph as DOT text, for the download: made here from the JSON, when asked
    for (it takes no torch and no layout; 0.2 s for 8,000 nodes, which every run would pay)."""
    graph = Graph.from_json(graph_json)
    return export(graph, "dot", rankdir=rankdir, color_by=default_coloring(graph)).decode()


def draw(runner: JobRunner, graph_json: str, rankdir: str, expanded: tuple[str, ...], *,
         depth: int | None = None, roll: bool = False) -> Drawn | Failure:
    """The graph's view with the `expanded` module boxes opened, laid out in the worker."""
    return _call(runner, DRAW_JOB, graph_json, rankdir, expanded, _budget(runner), depth, roll)


def memory(runner: JobRunner, graph_json: str) -> MemoryPanel | Failure:
    """The memory of one step of the graph (forward, backward from its output), replayed in the worker."""
    return _call(runner, MEMORY_JOB, graph_json)


def syntax_problem(program: str) -> Failure | None:
    """What is wrong with `program` before running it (the language's validate), or None.

    Cheap enough for every keystroke: it parses and checks, never runs.
    """
    try:
        validate(program)
    except ExprError as e:
        return Failure(e.message, kind=e.kind, line=e.line, col=e.col, excerpt=e.excerpt)
    return None


def _budget(runner: JobRunner) -> float:
    """The seconds a job may plan for: a margin under the runner's hard limit, so
    the job stops its own `dot` before the worker is killed with `dot` still running."""
    return max(1.0, runner.time_limit * 0.85 - 0.5)


def _call(runner: JobRunner, job: JobRef, *args: Any) -> Any:
    """Run `job` in the worker; the runner's and the job's errors become Failures."""
    try:
        return runner.run(job, *args)
    except ExprError as e:
        return Failure(e.message, kind=e.kind, line=e.line, col=e.col, excerpt=e.excerpt)
    except Exception as e:  # noqa: BLE001 - the page must show a message, never a traceback
        return Failure(
            f"{type(e).__name__}: {e}. This is a bug in graphviz-app; "
            "please report it with the program that caused it",
            kind="internal",
        )
