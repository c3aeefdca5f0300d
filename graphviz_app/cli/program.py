"""What `render` and `check` share: the program or script a person named, read, checked and located."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..expr.compose import Composed, compose
from ..expr.errors import ExprError
from ..expr.limits import Limits
from ..expr.validator import validate
from ..runner import RunnerError
from .failure import Failure
from .files import FileProblem, check_script, read_program
from .parser import LAYOUT_SECONDS
from .progress import Progress

__all__ = ["check_script_path", "composed_program", "located", "progress_of", "validate_program"]

def progress_of(args: argparse.Namespace) -> Progress:
    return Progress(f"graphviz-app {args.command}", enabled=True if args.progress else None)


def validate_program(composed: Composed) -> None:
    try:
        validate(composed.source)
    except ExprError as e:
        raise Failure(composed.locate(e)) from e


def located(composed: Composed, e: ExprError | RunnerError, args: argparse.Namespace) -> str:
    """The worker's error, positioned in the part the person typed; a time-out says which limit."""
    if isinstance(e, RunnerError):
        text = e.message
    else:
        text = composed.locate(e)
    if e.kind == "time" and getattr(e, "line", None) is None:
        text += (f" (the program may run {Limits().max_seconds:g} s, Limits.max_seconds; the whole command "
                 f"--timeout {args.timeout or LAYOUT_SECONDS:g} s)")
    return text


def composed_program(args: argparse.Namespace) -> Composed:
    text = None
    if args.program:
        try:  # at most the limit + 1 characters: --program /dev/zero is refused, not read
            text = read_program(Path(args.program), limit=Limits().max_source_chars)
        except FileProblem as e:
            raise Failure(str(e)) from e
    try:
        return compose(args.target, definitions=args.var, program=text, program_name=args.program or "the program")
    except ExprError as e:
        raise Failure(e.message) from e


def check_script_path(path: Path) -> None:
    try:
        check_script(path)  # a directory, a FIFO or a device is refused, never opened
    except FileProblem as e:
        raise Failure(str(e)) from e
