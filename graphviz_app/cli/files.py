"""The files a person names on the command line: refused clearly when they are not regular files, read bounded."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from ..errors import GraphvizAppError

__all__ = ["SCRIPT_TARGET", "FileProblem", "file_kind", "check_script", "check_output", "read_input", "read_program",
           "named_path"]

SCRIPT_TARGET = re.compile(r"^(?P<path>.+\.py):(?P<func>[A-Za-z_][A-Za-z0-9_]*)$")
"""SCRIPT.py:FUNCTION, as every command takes it."""


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


def read_input(path: Path, *, limit: int, what: str, fix: str = "give a regular file",
               too_large: str | None = None) -> str:
    """The text of a file the person named, refused at once when it is not a regular file, read bounded.

    Every file the CLI reads goes through here: a device (/dev/zero) or a FIFO is
    refused from its `stat` without being opened (a FIFO with no writer would block,
    /dev/zero never ends), the file is opened without blocking and checked again
    once open, and at most `limit` + 1 bytes are read.

    Args:
        path: the file.
        limit: the most bytes it may have.
        what: what the file is, for messages ("the saved graph", "--program").
        fix: what to do instead of a special file.
        too_large: the message for a file over `limit` (default: its size and the limit).

    Raises:
        FileProblem: missing, a directory or a special file, over `limit` bytes, or not UTF-8 text.
    """
    kind = file_kind(path)
    if kind is None:
        raise FileProblem(f"cannot read {what} {path}: No such file or directory")
    if kind != "a regular file":
        raise FileProblem(f"cannot read {what} {path}: it is {kind}, not a regular file; {fix}")
    try:
        # O_NONBLOCK: if the path became a FIFO since the check, opening it does not wait for a writer.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with open(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise FileProblem(f"cannot read {what} {path}: it stopped being a regular file; {fix}")
            data = f.read(limit + 1)
    except OSError as e:
        raise FileProblem(f"cannot read {what} {path}: {e.strerror or e}") from e
    if len(data) > limit:
        raise FileProblem(too_large or f"{what} {path} is larger than {limit:,} bytes, the most it may have")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise FileProblem(f"cannot read {what} {path}: it is not UTF-8 text ({e.reason} at byte {e.start})") from e


def check_output(path: Path) -> None:
    """Refuse an output path where writing would block or write into something that is not a file.

    A FIFO with no reader blocks its writer forever, and a device (/dev/sda) is not
    a picture: both are refused from their `stat`, never opened. A missing file is fine.

    >>> check_output(Path("/tmp/graphviz-app-no-such-file.svg"))
    >>> check_output(Path("/dev/null"))
    Traceback (most recent call last):
    ...
    graphviz_app.cli.files.FileProblem: cannot write /dev/null: it is a character device, ...
    """
    kind = file_kind(path)
    if kind is not None and kind != "a regular file":
        raise FileProblem(f"cannot write {path}: it is {kind}, not a regular file; name a new or regular file")


def read_program(path: Path, *, limit: int, option: str = "--program") -> str:
    """The text of a program file, at most `limit` characters (`read_input` with 4 bytes a character).

    Raises:
        FileProblem: missing, a directory or a special file (never opened), longer
            than `limit` characters, or not UTF-8 text.
    """
    too_long = (f"{option} {path} is longer than {limit:,} characters, the most a program may have "
                "(Limits.max_source_chars): make it shorter, or write a Python script and render SCRIPT.py:FUNCTION")
    text = read_input(path, limit=4 * limit, what=option, fix="save the program in a text file and name that",
                      too_large=too_long)  # UTF-8: at most 4 bytes a character
    if len(text) > limit:
        raise FileProblem(too_long)
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
