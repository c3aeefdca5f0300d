"""A CLI killed with SIGKILL while the person's function runs leaves no worker behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from waiting import process_alive, worker_ends_with_its_owner

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX processes and signals")

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """\
import os
import time
from pathlib import Path


def hangs():
    Path("worker.pid").write_text(str(os.getpid()))
    time.sleep(600)
"""


@pytest.mark.slow  # the script worker imports torch before the function runs
def test_a_cli_killed_while_the_function_runs_takes_its_worker_with_it(tmp_path: Path) -> None:
    (tmp_path / "steps.py").write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cli = subprocess.Popen([sys.executable, "-m", "graphviz_app.cli", "render", "steps.py:hangs", "-o", "g.svg",
                            "--timeout", "600"], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    worker = worker_ends_with_its_owner(cli, tmp_path / "worker.pid", start_timeout=180, owner_name="the CLI")
    assert cli.returncode == -signal.SIGKILL  # the owner died without a chance to clean up
    assert worker != cli.pid and not process_alive(worker)  # and its worker went with it
