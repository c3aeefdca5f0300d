"""Files named on the command line: directories and special files refused at once, programs read bounded."""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from graphviz_app.cli.commands import EXIT_BAD_INPUT, main

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")


def _main_within(argv: list[str], seconds: float = 120.0) -> int:
    """`main(argv)` on a thread: a test that would block on a FIFO fails instead of hanging."""
    out: list[int] = []
    thread = threading.Thread(target=lambda: out.append(main(argv)), daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"graphviz-app {' '.join(argv)} did not return within {seconds:g} s"
    return out[0]


@pytest.fixture
def place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models").mkdir()
    (tmp_path / "dir.py").mkdir()
    os.mkfifo(tmp_path / "fifo.py")
    os.mkfifo(tmp_path / "prog.fifo")
    (tmp_path / "prog.txt").write_text("x = torch.ones(2, requires_grad=True)\n(x * 2).sum()\n")
    (tmp_path / "model.py").write_text(
        "import torch\n\ndef build():\n    return torch.ones(2, requires_grad=True).sum()\n")
    return tmp_path


CASES: list[tuple[list[str], str]] = [
    (["models"], r"models is a directory, not SCRIPT\.py:FUNCTION: name a Python file in it .*models/model\.py:build"),
    (["models/"], r"models/ is a directory"),
    (["models:build"], r"models is a directory, not a Python file: name the script in it"),
    (["dir.py:build"], r"dir\.py is a directory, not a Python file: name a script in it and its function"),
    (["fifo.py:build"], r"fifo\.py is a FIFO \(named pipe\), not a regular file"),
    (["model.py"], r"model\.py is a script: add the function to call, as SCRIPT\.py:FUNCTION, e\.g\. model\.py:build"),
    (["prog.txt"], r"prog\.txt is a file, not an expression: to run the program in it, give --program prog\.txt"),
    (["prog.txt:build"], r"prog\.txt is not a \.py file"),
    (["missing.py"], r"no such script: missing\.py"),
    (["--program", "/dev/zero"], r"cannot read --program /dev/zero: it is a character device, not a regular file"),
    (["--program", "prog.fifo"], r"cannot read --program prog\.fifo: it is a FIFO \(named pipe\)"),
    (["--program", "models"], r"cannot read --program models: it is a directory"),
    (["--program", "missing.txt"], r"cannot read --program missing\.txt: No such file or directory"),
]


@pytest.mark.parametrize(("args", "message"), CASES, ids=[" ".join(a) for a, _ in CASES])
def test_a_directory_or_special_file_is_refused_at_once_with_what_to_give(
    place: Path, args: list[str], message: str, capsys: pytest.CaptureFixture[str],
) -> None:
    assert _main_within(["render", *args, "-o", "out.svg"]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert re.search(message, err), err
    assert err.count("\n") == 1 and not (place / "out.svg").exists()


def test_program_reads_at_most_the_limit_plus_one_character(place: Path, capsys: pytest.CaptureFixture[str]) -> None:
    huge = place / "huge.txt"
    with open(huge, "wb") as f:
        f.truncate(64 * 1024**3)  # sparse: 64 GiB that reading in full would never finish
    assert _main_within(["render", "--program", str(huge), "-o", "out.svg"], seconds=60) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert re.search(r"huge\.txt is longer than 10,000 characters, the most a program may have", err)


@pytest.mark.parametrize(
    ("write", "message"),
    [
        (lambda p: p.write_bytes(b"x = 1\n\xff\xfe\n"), r"it is not UTF-8 text \(invalid start byte at byte 6\)"),
        (lambda p: p.write_text("y = 1\n" * 2000), r"longer than 10,000 characters"),
    ],
)
def test_program_files_that_are_not_a_program_say_why(
    place: Path, write: Callable[[Path], object], message: str, capsys: pytest.CaptureFixture[str],
) -> None:
    write(place / "bad.txt")
    assert _main_within(["render", "--program", "bad.txt", "-o", "out.svg"]) == EXIT_BAD_INPUT
    assert re.search(message, capsys.readouterr().err)


def test_a_regular_program_file_still_renders(place: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _main_within(["render", "--program", "prog.txt", "-o", "out.json"]) == 0
    assert (place / "out.json").exists()
