"""A CLI killed with SIGKILL while the person's function runs leaves no worker behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from waiting import process_alive, wait_until

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
    pid_file, worker = tmp_path / "worker.pid", 0
    try:
        wait_until(lambda: pid_file.exists() and pid_file.read_text(), timeout=180, what="the function starting")
        worker = int(pid_file.read_text())
        assert worker != cli.pid and process_alive(worker)
        cli.send_signal(signal.SIGKILL)
        cli.wait(30)
        wait_until(lambda: not process_alive(worker), timeout=30,
                   what=f"worker {worker} ending after the CLI's SIGKILL")
    finally:
        if cli.poll() is None:
            cli.kill()
        if worker and process_alive(worker):
            os.kill(worker, signal.SIGKILL)
