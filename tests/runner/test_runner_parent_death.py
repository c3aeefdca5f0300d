"""A worker ends when the process that owns its pool is killed with SIGKILL (no pipe closes while a job runs)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from waiting import process_alive, worker_ends_with_its_owner

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX processes and signals")

ROOT = Path(__file__).resolve().parents[2]

OWNER = """
import sys
from graphviz_app.runner import IsolatedRunner
with IsolatedRunner(workers=0, max_workers=1, time_limit=600, memory_limit=None) as runner:
    runner.run(__import__("tests.runner.test_runner_parent_death", fromlist=["x"]).sleeper, sys.argv[1])
"""


def sleeper(pid_file: str) -> None:
    """A job that says its pid, then runs far longer than the test (a FUNC that hangs)."""
    Path(pid_file).write_text(str(os.getpid()))
    time.sleep(600)


def test_a_worker_running_a_job_ends_when_its_owner_is_killed(tmp_path: Path) -> None:
    pid_file = tmp_path / "worker.pid"
    # the job is this module: the worker imports it, and with it the helpers in tests/support
    paths = [str(ROOT), str(ROOT / "tests" / "support"), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(pid_file)], env=env, cwd=ROOT)
    worker = worker_ends_with_its_owner(owner, pid_file, start_timeout=120, owner_name="its owner")
    assert owner.returncode == -signal.SIGKILL  # the owner died without a chance to clean up
    assert worker != owner.pid and not process_alive(worker)  # and its worker went with it
