"""The CLI never hangs and never prints a traceback: special files refused, a hanging FUNC stopped, an exit reported.

Each case runs the real command in a subprocess with a timeout far above what it
should take: a hang fails the test (subprocess.TimeoutExpired) instead of
blocking the suite.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from graphviz_app.model import Graph, Node, NodeKind

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs and /dev/zero are POSIX")

ROOT = Path(__file__).resolve().parents[2]
HANG_LIMIT_S = 240  # what a hang looks like here; every command below should end in a fraction of it

SCRIPT = """\
import os
import time

import torch


def hangs():
    while True:
        time.sleep(0.1)


def exits():
    os._exit(7)


def model_that_hangs():
    time.sleep(3600)
    return torch.nn.Linear(2, 2), torch.ones(1, 2)
"""


def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "graphviz_app.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=HANG_LIMIT_S)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "g.json").write_text(Graph((Node("n0", NodeKind.OUTPUT, "output"),), ()).to_json())
    os.mkfifo(tmp_path / "pipe.json")
    os.mkfifo(tmp_path / "pipe.svg")
    os.mkfifo(tmp_path / "pipe.html")
    (tmp_path / "steps.py").write_text(SCRIPT)
    return tmp_path


def _no_traceback(done: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr, done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["diff", "/dev/zero", "g.json"], r"cannot read the saved graph /dev/zero: it is a character device"),
        (["diff", "pipe.json", "g.json"], r"cannot read the saved graph pipe\.json: it is a FIFO \(named pipe\)"),
        (["render", "pipe.json", "-o", "out.svg"], r"pipe\.json: it is a FIFO \(named pipe\), not a regular file"),
        (["render", "g.json", "-o", "pipe.svg"], r"cannot write pipe\.svg: it is a FIFO \(named pipe\)"),
        (["diff", "g.json", "g.json", "-o", "pipe.svg"], r"cannot write pipe\.svg: it is a FIFO"),
        (["memory", "steps.py:model_that_hangs", "-o", "pipe.html"], r"cannot write pipe\.html: it is a FIFO"),
    ],
)
def test_a_fifo_or_a_device_is_refused_at_once_never_opened(folder: Path, args: list[str], message: str) -> None:
    import re

    done = _cli(args, folder)
    assert done.returncode == 2, done.stderr
    assert re.search(message, done.stderr), done.stderr
    _no_traceback(done)


@pytest.mark.slow  # starts the CLI's worker, then waits out the --timeout
def test_a_script_function_that_hangs_is_stopped_at_the_timeout(folder: Path) -> None:
    done = _cli(["render", "steps.py:hangs", "-o", "g.svg", "--timeout", "5"], folder)
    assert done.returncode == 2
    assert "steps.py:hangs ran longer than the command's --timeout of 5 s" in done.stderr, done.stderr
    assert not (folder / "g.svg").exists()
    _no_traceback(done)


@pytest.mark.slow  # starts the CLI's worker
def test_a_script_function_calling_os_exit_is_reported_with_its_code(folder: Path) -> None:
    done = _cli(["render", "steps.py:exits", "-o", "g.svg"], folder)
    assert done.returncode == 2
    assert "steps.py:exits ended the process running it with exit code 7 (os._exit()" in done.stderr, done.stderr
    _no_traceback(done)


@pytest.mark.slow  # starts the CLI's worker, then waits out the --timeout
def test_memory_has_a_timeout_that_stops_a_hanging_function(folder: Path) -> None:
    done = _cli(["memory", "steps.py:model_that_hangs", "--device", "meta", "--timeout", "5"], folder)
    assert done.returncode == 2
    assert "ran longer than the command's --timeout of 5 s" in done.stderr, done.stderr
    _no_traceback(done)


@pytest.mark.slow  # starts the CLI's worker, then waits out the --timeout
def test_a_timed_out_check_prints_one_line_and_no_traceback(folder: Path) -> None:
    program = ("x = torch.randn(400, 20000, requires_grad=True)\nfor i in range(1000):\n"
               "    b = torch.cdist(x, x, p=1).sum()\nb")
    done = _cli(["check", program, "--timeout", "3"], folder)
    assert done.returncode == 2
    assert "ran longer than its time limit of 3 s" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    _no_traceback(done)
