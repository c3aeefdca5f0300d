"""Import the person's `SCRIPT.py` and call its function, inside a worker process the command can stop.

Like pytest importing a test file: the script's folder goes on `sys.path` while
it is imported, so its own imports work. Whatever it raises (SystemExit and
SyntaxError included) becomes one `TraceError` naming the line of the script.
A script that hangs or ends its process (`os._exit`) stops the worker, not the
command: the runner says which (`JobTimeout`, `WorkerCrashed`).
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
import traceback
from pathlib import Path
from typing import Any

from ..errors import TraceError
from .deferred import DeferredNames

__all__ = ["run_script", "exception_line"]


def run_script(path: Path, name: str, target: str, *, names: DeferredNames | None = None) -> Any:
    """Import `path` and return what `name()` returns.

    Args:
        path: the script (the CLI checked that it is a regular file).
        name: the function to call; it takes no arguments.
        target: "SCRIPT.py:FUNCTION", for messages.
        names: a recording to call the function under (its modules named later).

    Raises:
        TraceError: the import or the call failed, or the function does not exist, saying where.
    """
    spec = importlib.util.spec_from_file_location(f"graphviz_app_script_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise TraceError(f"cannot import {path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    folder = str(path.resolve().parent)
    sys.path.insert(0, folder)  # so the script's own imports work
    try:
        spec.loader.exec_module(module)
    except BaseException as e:  # noqa: BLE001 - SystemExit and SyntaxError included
        raise TraceError(f"importing {path} failed: {exception_line(e, path)}") from e
    finally:
        sys.path.remove(folder)
    func = getattr(module, name, None)
    if func is None:
        found = sorted(
            n for n, v in vars(module).items() if callable(v) and getattr(v, "__module__", None) == module.__name__
        )
        raise TraceError(f"{path} has no function {name!r} (it defines: {', '.join(found) or 'none'})")
    if not callable(func):
        raise TraceError(f"{target}: {name} is a {type(func).__name__}, not a function")
    try:
        with names if names is not None else contextlib.nullcontext():
            return func()
    except BaseException as e:  # noqa: BLE001
        raise TraceError(f"{target} raised {exception_line(e, path)}") from e


def exception_line(e: BaseException, path: Path) -> str:
    """`Type: first line of the message (line N of script.py)`: where in the person's script it was raised.

    >>> exception_line(ValueError("bad\\nmore"), Path("model.py"))
    'ValueError: bad'
    """
    where = ""
    if isinstance(e, SyntaxError):
        where = f" (line {e.lineno})"
    else:
        frames = [f for f in traceback.extract_tb(e.__traceback__) if Path(f.filename).resolve() == path.resolve()]
        if frames:
            where = f" (line {frames[-1].lineno} of {path.name})"
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}{': ' + text if text else ''}{where}"
