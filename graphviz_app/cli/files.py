"""The files a person names on the command line: refused clearly when they are not regular files, read bounded."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..errors import GraphvizAppError

__all__ = ["FileProblem", "file_kind", "check_script", "read_program", "named_path"]


class FileProblem(GraphvizAppError, ValueError):
    """A named file cannot be used: missing, a directory, a special file, too long, not text."""


_KINDS = (
    (stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
)


def file_kind(path: Path) -> str | None:
    """"a regular file", "a directory", "a FIFO (named pipe)", ... ; None when nothing is there.

    Judged with `stat` alone: a FIFO or a device is never opened here (opening a
    FIFO with no writer blocks, and /dev/zero never ends).

    >>> file_kind(Path("/"))
    'a directory'
    """
    try:
        mode = path.stat().st_mode
    except (OSError, ValueError):
        return None
    if stat.S_ISREG(mode):
        return "a regular file"
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def check_script(path: Path) -> None:
    """Refuse a `SCRIPT.py` that is missing, a directory or a special file, saying what to give instead."""
    kind = file_kind(path)
    if kind is None:
        raise FileProblem(f"no such script: {path}")
    if kind == "a directory":
        raise FileProblem(f"{path} is a directory, not a Python file: name a script in it and its function, "
                          f"e.g. {path / 'model.py'}:build")
    if kind != "a regular file":
        raise FileProblem(f"{path} is {kind}, not a regular file: save the script as a .py file and name it")


def read_program(path: Path, *, limit: int, option: str = "--program") -> str:
    """The text of a program file, reading at most `limit` + 1 characters.

    Raises:
        FileProblem: missing, a directory or a special file (never opened), longer
            than `limit` characters, or not UTF-8 text.
    """
    kind = file_kind(path)
    if kind is None:
        raise FileProblem(f"cannot read {option} {path}: No such file or directory")
    if kind != "a regular file":
        raise FileProblem(f"cannot read {option} {path}: it is {kind}, not a regular file; save the program "
                          "in a text file and name that")
    try:
        # O_NONBLOCK: if the path became a FIFO since the check, opening it does not wait for a writer.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with open(fd, encoding="utf-8", newline="") as f:
            text = f.read(limit + 1)
    except UnicodeDecodeError as e:
        raise FileProblem(f"cannot read {option} {path}: it is not UTF-8 text ({e.reason} at byte {e.start})") from e
    except OSError as e:
        raise FileProblem(f"cannot read {option} {path}: {e.strerror or e}") from e
    if len(text) > limit:
        raise FileProblem(f"{option} {path} is longer than {limit:,} characters, the most a program may have "
                          "(Limits.max_source_chars): make it shorter, or write a Python script and render "
                          "SCRIPT.py:FUNCTION")
    return text


def named_path(target: str) -> str | None:
    """What is wrong with a render target that names a path but is not `SCRIPT.py:FUNCTION`, or None.

    A target is taken for a path when something exists there, or when it ends in
    ".py" or a path separator (an expression never does).
    """
    head, colon, func = target.rpartition(":")
    if colon and func.isidentifier() and file_kind(Path(head)) is not None:
        return _named_script(head, func)
    path = Path(target)
    kind = file_kind(path)
    if kind is None:
        if target.endswith((".py", "/", os.sep)):
            return f"no such script: {target} (give SCRIPT.py:FUNCTION, e.g. model.py:build)"
        return None
    if kind == "a directory":
        return (f"{target} is a directory, not SCRIPT.py:FUNCTION: name a Python file in it and the function "
                f"to call, e.g. {path / 'model.py'}:build")
    if kind == "a regular file" and target.endswith(".py"):
        return (f"{target} is a script: add the function to call, as SCRIPT.py:FUNCTION, e.g. {target}:build "
                "(the function takes no arguments and returns the output, or a model and its inputs)")
    if kind == "a regular file":
        return (f"{target} is a file, not an expression: to run the program in it, give --program {target}; "
                "for a Python script, give SCRIPT.py:FUNCTION")
    return f"{target} is {kind}, not SCRIPT.py:FUNCTION: name a Python file and the function to call"


def _named_script(head: str, func: str) -> str:
    """A `PATH:FUNCTION` whose PATH exists but is not a .py script."""
    path = Path(head)
    kind = file_kind(path)
    if kind == "a directory":
        return (f"{head} is a directory, not a Python file: name the script in it, "
                f"e.g. {path / 'model.py'}:{func}")
    if kind == "a regular file":
        return f"{head} is not a .py file: the script's name must end in .py, e.g. {path.stem}.py:{func}"
    return f"{head} is {kind}, not a Python file: save the script as a .py file and name it"
