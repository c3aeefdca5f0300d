"""`graphviz-app check SCRIPT.py:FUNC --modules`: the script's model checked module by module, in the CLI's worker."""

from __future__ import annotations

import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..drawing.check_style import save_check
from ..errors import TraceError
from ..tracing.big_stack import call_with_large_stack
from ..tracing.model_check import check_model
from ..tracing.module_trace import trace_model
from .script_forms import model_call
from .scripts import run_script

__all__ = ["ModelCheckRequest", "model_check_job"]


@dataclass(frozen=True, slots=True)
class ModelCheckRequest:
    """`check_model`'s options as the CLI gives them, the drawing to write, and whether to show progress."""

    strategy: str = "all"
    include: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()
    max_evaluations: int | None = None
    seconds: float | None = None
    probes: int = 12
    eps: float = 1e-6
    atol: float = 1e-7
    rtol: float = 1e-5
    kinks: str = "pass"
    modes: tuple[str, ...] = ("rev",)
    order: int = 1
    output: str | None = None
    progress: bool = False

    def options(self) -> dict[str, Any]:
        """The keywords of `check_model`."""
        found = asdict(self)
        del found["output"], found["progress"]
        return found


def model_check_job(path: str, func: str, target: str, request: dict[str, Any],
                    cwd: str) -> tuple[bool, str, dict[str, Any], str | None]:
    """Call `func()` of the script, check the model it returns: (passed, report text, report dict, drawing path).

    `request` holds `ModelCheckRequest`'s fields by name; `cwd` is the command's folder.

    Raises:
        TraceError: the script fails or returns no model with its inputs.
        ModelCheckError: `check_model` refuses an option, or the model's forward raised.
    """
    os.chdir(cwd)
    asked = ModelCheckRequest(**request)

    def run() -> tuple[bool, str, dict[str, Any], str | None]:
        call = model_call(run_script(Path(path), func, target), target)
        if call is None:
            raise TraceError(f"{target} returned no model with its inputs: return (model, x), (model, (x, y)), "
                             "(model, args, kwargs) or {'model': model, 'args': (x,), 'kwargs': {...}}")
        model, args, kwargs, _ = call
        result = check_model(model, *args, progress=_bar if asked.progress else None, **asked.options(), **kwargs)
        written = None
        if asked.output:
            graph = trace_model(model, *args, **kwargs)
            written = str(save_check(graph, result, asked.output))
        return result.passed, result.text(), result.to_dict(), written

    return call_with_large_stack(run)


def _bar(done: int, total: int, label: str) -> None:
    """A progress bar on the stderr the worker shares with the command."""
    width = 30
    filled = width * done // max(total, 1)
    line = f"graphviz-app check: [{'#' * filled}{'.' * (width - filled)}] {done}/{total} {label}"
    end = "\n" if done == total or not sys.stderr.isatty() else ""
    print(("\r" if sys.stderr.isatty() else "") + line[:120].ljust(120 if sys.stderr.isatty() else 0),
          end=end, file=sys.stderr, flush=True)
