"""`graphviz-app serve`: the settings Streamlit runs with, start-up errors, and a clean Ctrl-C."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from waiting import wait_until
from web_support import ROOT, alive, descendants, free_port, wait_healthy

from graphviz_app.web.server import APP_PATH, serve, streamlit_command


def option(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def test_streamlit_runs_the_page_private_headless_quiet_and_without_a_file_watcher() -> None:
    command = streamlit_command(port=8765)
    assert command[:5] == [sys.executable, "-m", "streamlit", "run", str(APP_PATH)]
    assert APP_PATH.name == "app.py" and APP_PATH.is_file()
    assert option(command, "--server.address") == "127.0.0.1"
    assert option(command, "--server.port") == "8765"
    assert option(command, "--server.headless") == "true"
    assert option(command, "--browser.gatherUsageStats") == "false"
    assert option(command, "--server.fileWatcherType") == "none"


def test_the_host_can_be_chosen() -> None:
    assert option(streamlit_command(host="0.0.0.0", port=9000), "--server.address") == "0.0.0.0"


def test_a_taken_port_is_refused_with_what_to_do(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert serve(port=port) == 3
    err = capsys.readouterr().err
    assert f"cannot listen on 127.0.0.1:{port}" in err
    assert "pass --port N" in err


def test_a_port_out_of_range_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert serve(port=70000) == 2
    assert "--port must be between 1 and 65535, got 70000" in capsys.readouterr().err


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="follows the server's processes through /proc")
def test_ctrl_c_in_a_terminal_stops_the_server_and_its_workers(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "serve.log"
    with log.open("w") as out:
        # A terminal's Ctrl-C goes to the whole foreground process group: start one of our own.
        server = subprocess.Popen(
            [sys.executable, "-m", "graphviz_app.cli", "serve", "--port", str(port)],
            cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )
        try:
            wait_healthy(f"http://127.0.0.1:{port}", server, log)
            # Streamlit runs as a child process (the worker pool starts with the first page view).
            wait_until(lambda: descendants(server.pid), timeout=60, what="Streamlit's process starting")
            family = descendants(server.pid)
            os.killpg(server.pid, signal.SIGINT)
            assert server.wait(timeout=60) == 0
        finally:
            if server.poll() is None:
                os.killpg(server.pid, signal.SIGKILL)
    text = log.read_text()
    assert f"graphviz-app: serving the page on http://localhost:{port} (Ctrl-C to stop)" in text
    assert "graphviz-app: stopped." in text
    assert "Traceback" not in text
    wait_until(lambda: not any(alive(p) for p in family), timeout=30, what="every process of the server ending")
