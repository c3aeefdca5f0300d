"""The page's shared, cached work: the worker processes, the results cache, and each job the page asks of them."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Hashable
from typing import TypeVar

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from graphviz_app.web import compare_view, service
from graphviz_app.web.cache import ResultCache
from graphviz_app.web.fairness import FairRunner, SessionRunner
from graphviz_app.web.pair import SavedPair
from graphviz_app.web.results import Analysis, CheckModes, Failure, GradientCheck
from graphviz_app.web.urlstate import CheckInput, Options

__all__ = ["analyze", "available_devices", "cached", "check_gradient", "compare_programs", "my_runner", "open_saved",
           "picture", "picture_key", "results_cache", "runner"]

T = TypeVar("T")


@st.cache_resource(show_spinner="Starting the worker processes…")
def runner() -> FairRunner:
    """The worker processes every program runs in, shared fairly by all sessions."""
    return FairRunner(service.page_runner())


@st.cache_resource(show_spinner=False)
def results_cache() -> ResultCache:
    """Results shared by all sessions, bounded by bytes and age.

    Not st.cache_data: that stores whatever the function returns, so one
    visitor's "all workers are busy" was served to every later visitor of the
    same link; this one keeps successes and the program's own errors only.
    """
    return ResultCache()


def my_runner(*, interruptible: bool = True) -> SessionRunner:
    """This session's share of the workers.

    `interruptible`: a newer press of Run ends the wait for the running job at
    once (Streamlit raises its rerun exception at the next session-state read,
    `newer_run_point`); the job goes on, so the next run takes it up if the
    program is the same, and stops it when the program changed.
    """
    s = st.session_state
    if "session_key" not in s:
        s.session_key = uuid.uuid4().hex
    return runner().for_session(s.session_key, on_wait=newer_run_point if interruptible else None)


def newer_run_point() -> None:
    """Read the session state: where Streamlit ends this run when the person asked for a newer one."""
    if get_script_run_ctx(suppress_warning=True) is not None:  # not from a download's thread
        _ = "session_key" in st.session_state


@st.cache_resource(show_spinner=False)
def available_devices() -> tuple[str, ...]:
    """cpu and each cuda:N the workers' torch sees."""
    return service.devices(runner().for_session("server"))


def cached(key: Hashable, spinner: str, compute: Callable[[], T]) -> T:
    """`compute()` unless the shared cache holds `key`; a spinner while it runs."""
    cache = results_cache()
    found = cache.get(key)
    if found is None:
        with st.spinner(spinner):
            found = compute()
        cache.put(key, found)
    return found


def analyze(program: str, options: Options) -> Analysis | Failure:
    """The program evaluated, traced and differentiated (cached by program and options)."""
    return cached(("analysis", program, options), "Running the program…",
                  lambda: service.analyze(my_runner(), program, options))


def check_gradient(
    program: str, options: Options, check: CheckInput, tolerances: tuple[float, float, float], modes: CheckModes
) -> GradientCheck | Failure:
    """A hand-derived gradient checked (cached by program, options, gradient, tolerances and modes)."""
    return cached(("check", program, options, check, tolerances, modes), "Checking the gradient…",
                  lambda: service.check_gradient(my_runner(), program, options, check, tolerances, modes))


def open_saved(data: bytes, name: str, options: Options) -> Analysis | Failure:
    """A saved graph read in the worker (cached by the file's bytes and the options that shape its view)."""
    shaping = Options(rankdir=options.rankdir, module_depth=options.module_depth, roll=options.roll)
    key = ("saved", hashlib.sha256(data).hexdigest(), name, shaping)
    return cached(key, "Opening the saved graph…", lambda: service.open_saved(my_runner(), data, name, shaping))


def picture_key(fmt: str, graph_json: str, rankdir: str) -> tuple[str, str, str]:
    """Where the shared cache keeps a graph's SVG or PNG download (or why it cannot be drawn)."""
    return (fmt, hashlib.sha256(graph_json.encode()).hexdigest(), rankdir)


def picture(fmt: str, graph_json: str, rankdir: str, session_runner: SessionRunner) -> bytes:
    """The SVG or PNG download, laid out in the worker when it is asked for (outside any script run).

    A failure is kept in the shared cache (unless it is one of the moment), where the page finds
    it and says why beside the downloads: the browser hears only that the download failed.
    """
    job = service.png if fmt == "png" else service.svg
    found = results_cache().get_or_run(picture_key(fmt, graph_json, rankdir),
                                       lambda: job(session_runner, graph_json, rankdir))
    if isinstance(found, Failure):
        raise RuntimeError(f"could not draw the {fmt.upper()}: {found}")
    return found


def compare_programs(first: Analysis, second: Analysis, options: Options) -> SavedPair | Failure:
    """The two programs' graphs aligned in the worker for the synced panes (cached by both graphs and direction)."""
    key = ("programs", *(hashlib.sha256(r.graph_json.encode()).hexdigest() for r in (first, second)), options.rankdir)
    return cached(key, "Comparing the two programs…", lambda: service.compare_graphs(
        my_runner(), first.graph_json, second.graph_json, compare_view.PROGRAM_LABELS, options))
