"""Workers neither re-run the parent's main script nor leave their children behind."""

from __future__ import annotations

import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
from waiting import wait_until

from graphviz_app.runner import IsolatedRunner, RunnerError

pytestmark = pytest.mark.skipif(not hasattr(os, "killpg"), reason="process groups are POSIX")


def test_workers_do_not_import_the_parents_main_script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    canary = tmp_path / "imported"
    page = tmp_path / "page.py"  # stands in for Streamlit's page script, which is __main__ there
    page.write_text(f"open({str(canary)!r}, 'w').write('the page ran in a worker')\n")
    fake_main = types.ModuleType("__main__")
    fake_main.__file__ = str(page)
    monkeypatch.setitem(sys.modules, "__main__", fake_main)
    with IsolatedRunner(workers=1, max_workers=1, time_limit=60) as runner:
        assert runner.run(os.getpid) != os.getpid()
    assert sys.modules["__main__"] is fake_main
    assert not canary.exists()


def _running(pattern: str) -> bool:
    return subprocess.run(["pgrep", "-f", pattern], capture_output=True).returncode == 0


def test_a_stopped_job_takes_its_child_processes_with_it() -> None:
    marker = "31.41592"  # a sleep no one else runs
    with IsolatedRunner(workers=1, max_workers=1, time_limit=60) as runner:
        with pytest.raises(RunnerError, match="time limit") as info:
            runner.run(subprocess.run, ["sleep", marker], time_limit=1)
        assert info.value.kind == "time"
        wait_until(lambda: not _running(f"sleep {marker}"), timeout=60, what="the job's child process ending")
