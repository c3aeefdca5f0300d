"""What the page calls: each job run in a worker of the page's shared runner, every error turned into a Failure."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, Protocol

from ..drawing.order_style import picture_coloring
from ..drawing.renderer import export
from ..expr import ExprError, validate
from ..expr.rehearsal import PRELOAD as LANGUAGE_PRELOAD
from ..model import Graph
from ..runner import IsolatedRunner, JobRef, RunnerError, RunnerSettings, shared_runner
from .memory_view import MemoryPanel
from .pair import SavedPair
from .results import Analysis, CheckModes, Failure, GradientCheck, Tolerances
from .upload import too_big
from .urlstate import CheckInput, Options

__all__ = [
    "JobRunner",
    "TIME_LIMIT_S",
    "MEMORY_LIMIT_BYTES",
    "SETTINGS",
    "page_runner",
    "devices",
    "analyze",
    "check_gradient",
    "png",
    "svg",
    "dot",
    "open_saved",
    "compare_saved",
    "compare_graphs",
    "memory",
    "syntax_problem",
    "JOBS",
]

# A program gets this long and this much memory in its worker; then it is
# stopped and the person told so. Override with GRAPHVIZ_APP_TIME_LIMIT (s).
TIME_LIMIT_S = float(os.environ.get("GRAPHVIZ_APP_TIME_LIMIT", "15"))
MEMORY_LIMIT_BYTES = 2 * 1024**3
_JOBS = "graphviz_app.jobs"

# The jobs, named: this process never imports the worker side (it imports torch).
DEVICES_JOB = JobRef(f"{_JOBS}.page", "devices_job")
ANALYSIS_JOB = JobRef(f"{_JOBS}.page", "analysis_job")
CHECK_JOB = JobRef(f"{_JOBS}.page", "check_job")
PNG_JOB = JobRef(f"{_JOBS}.pictures", "png_job")
SVG_JOB = JobRef(f"{_JOBS}.pictures", "svg_job")
SAVED_JOB = JobRef(f"{_JOBS}.saved", "saved_graph_job")
COMPARE_JOB = JobRef(f"{_JOBS}.compare_saved", "compare_saved_job")
COMPARE_GRAPHS_JOB = JobRef(f"{_JOBS}.compare_saved", "compare_graphs_job")
MEMORY_JOB = JobRef(f"{_JOBS}.page_memory", "memory_job")
JOBS = (DEVICES_JOB, ANALYSIS_JOB, CHECK_JOB, PNG_JOB, SVG_JOB, SAVED_JOB, MEMORY_JOB, COMPARE_JOB, COMPARE_GRAPHS_JOB)


class JobRunner(Protocol):
    """What runs the page's jobs: an `IsolatedRunner`, or one session's share of a `FairRunner`."""

    @property
    def time_limit(self) -> float: ...

    def run(self, job: Callable[..., Any] | JobRef, *args: Any) -> Any: ...


# The page's pool: two workers kept warm (a hostile program ties up one until its time
# limit), at most four at once (further requests wait for a free one).
SETTINGS = RunnerSettings(
    workers=2, max_workers=4, time_limit=TIME_LIMIT_S, memory_limit=MEMORY_LIMIT_BYTES,
    preload=(*LANGUAGE_PRELOAD, "graphviz_app.tracing.tracer", "graphviz_app.drawing.renderer", "gradcheck.checker",
             DEVICES_JOB.module, PNG_JOB.module, SAVED_JOB.module),
    name="graphviz-app-page",
)


def page_runner() -> IsolatedRunner:
    """The process's pool of warm workers the page's jobs run in (`SETTINGS`), started on first use."""
    return shared_runner("web.page", SETTINGS)


def devices(runner: JobRunner) -> tuple[str, ...]:
    """cpu and each cuda:N the worker's torch sees (the server never loads torch)."""
    found = _call(runner, DEVICES_JOB)
    return ("cpu",) if isinstance(found, Failure) else found


def analyze(runner: JobRunner, program: str, options: Options) -> Analysis | Failure:
    """Evaluate, trace and differentiate `program` under `options`; the graph as the viewer's data."""
    return _call(runner, ANALYSIS_JOB, program, options)


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
    """The graph as PNG, laid out on demand in the worker (refused when its pixels would take too long)."""
    return _call(runner, PNG_JOB, graph_json, rankdir, _budget(runner), runner.time_limit)


def svg(runner: JobRunner, graph_json: str, rankdir: str) -> bytes | Failure:
    """The graph as SVG, laid out on demand in the worker."""
    return _call(runner, SVG_JOB, graph_json, rankdir, _budget(runner))


def open_saved(runner: JobRunner, data: bytes, name: str, options: Options) -> Analysis | Failure:
    """A saved graph (the bytes of an uploaded `.json`) read and described in the worker.

    Files over `upload.MAX_UPLOAD_MB` are refused here, before they are sent anywhere; a file
    that takes the worker past its time or memory limit is reported as too big for the page.
    """
    refusal = too_big(len(data), name)
    if refusal is not None:
        return Failure(refusal, kind="input")
    found = _call(runner, SAVED_JOB, data, name, options)
    if not isinstance(found, Failure) or found.kind not in _TOO_BIG:
        return found
    instead = f"open it as a file instead: `graphviz-app render {name} -o graph.html` makes a page any browser opens"
    return Failure(_TOO_BIG[found.kind].format(name=name, limit=runner.time_limit, memory=MEMORY_LIMIT_BYTES / 2**30)
                   + instead, kind=found.kind)


def compare_saved(runner: JobRunner, data_a: bytes, name_a: str, data_b: bytes, name_b: str,
                  options: Options) -> SavedPair | Failure:
    """Two saved graphs (the bytes of two uploaded `.json`) read and aligned in the worker, for the synced panes.

    Either file over `upload.MAX_UPLOAD_MB` is refused here, before it is sent anywhere; a pair that takes
    the worker past its time or memory limit is reported as too big for the page.
    """
    for data, name in ((data_a, name_a), (data_b, name_b)):
        refusal = too_big(len(data), name)
        if refusal is not None:
            return Failure(refusal, kind="input")
    found = _call(runner, COMPARE_JOB, data_a, name_a, data_b, name_b, options)
    if not isinstance(found, Failure) or found.kind not in _TOO_BIG:
        return found
    names = f"{name_a} and {name_b}"
    instead = f"compare them as a file instead: `graphviz-app diff {name_a} {name_b} -o cmp.html`"
    return Failure(_TOO_BIG[found.kind].format(name=names, limit=runner.time_limit, memory=MEMORY_LIMIT_BYTES / 2**30)
                   + instead, kind=found.kind)


def compare_graphs(runner: JobRunner, json_a: str, json_b: str, labels: tuple[str, str],
                   options: Options) -> SavedPair | Failure:
    """The graphs of two programs the page ran (`Analysis.graph_json`) aligned in the worker, for the synced panes."""
    return _call(runner, COMPARE_GRAPHS_JOB, json_a, json_b, labels, options)


# A saved graph that takes the worker past a limit: what to say (the runner's words are about programs).
_TOO_BIG = {
    "overtime": "reading {name} took longer than the {limit:g} s a job may run, with the machine to itself: "
                "the graph is too big to show on the page; ",
    "time": "reading {name} took longer than the {limit:g} s a job may run while other jobs ran: it may pass "
            "at a quieter moment (upload it again); or ",
    "memory": "reading {name} needed more than the {memory:g} GiB a job may use: the graph is too big to show "
              "on the page; ",
    "crash": "the worker reading {name} stopped (most often: out of memory): the graph is too big to show on "
             "the page; ",
}


def dot(graph_json: str, rankdir: str) -> str:
    """The whole graph as DOT text, for the download: made here from the JSON, when asked
    for (it takes no torch and no layout; 0.2 s for 8,000 nodes, which every run would pay)."""
    graph = Graph.from_json(graph_json)
    return export(graph, "dot", rankdir=rankdir, color_by=picture_coloring(graph)).decode()


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
    except RunnerError as e:
        return Failure(e.message, kind=e.kind)
    except Exception as e:  # noqa: BLE001 - the page must show a message, never a traceback
        return Failure(
            f"{type(e).__name__}: {e}. This is a bug in graphviz-app; "
            "please report it with the program that caused it",
            kind="internal",
        )
