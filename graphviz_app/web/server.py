"""Start the Streamlit page as a child process: `graphviz-app serve` and `make run`."""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from types import FrameType

__all__ = ["APP_PATH", "streamlit_command", "serve"]

APP_PATH = Path(__file__).resolve().parent / "app.py"

# How long a stopped server may take to finish its sessions before we kill it.
_STOP_GRACE_S = 10.0


def streamlit_command(*, host: str = "127.0.0.1", port: int = 8501) -> list[str]:
    """The command line that runs the page with the project's server settings.

    Usage statistics are off because Streamlit's page otherwise calls an
    outside host; the file watcher is off because it floods on a virtualenv;
    the address is given explicitly so Streamlit never looks up an external
    IP to print.

    >>> streamlit_command(port=9000)[-2:]
    ['--server.port', '9000']
    """
    return [
        sys.executable, "-m", "streamlit", "run", str(APP_PATH),
        "--server.headless", "true",
        "--browser.gatherUsageStats", "false",
        "--server.fileWatcherType", "none",
        "--server.runOnSave", "false",
        "--global.developmentMode", "false",
        "--client.toolbarMode", "minimal",
        "--server.address", host,
        "--server.port", str(port),
    ]


def serve(*, host: str = "127.0.0.1", port: int = 8501) -> int:
    """Run the web page until Ctrl-C; return the exit code.

    Args:
        host: the address to listen on; 127.0.0.1 (the default) keeps the
            page private to this machine, 0.0.0.0 shares it with the network.
        port: the TCP port.

    Returns:
        0 after Ctrl-C or SIGTERM; 2 for a port out of range, 3 when the
        environment stops the server from starting (Streamlit missing, the
        port taken), with the reason printed; else Streamlit's exit code.
    """
    problem = _startup_problem(host=host, port=port)
    if problem:
        message, code = problem
        print(f"graphviz-app serve: error: {message}", file=sys.stderr)
        return code
    child = subprocess.Popen(streamlit_command(host=host, port=port))
    print(f"graphviz-app: serving the page on {_display_url(host, port)} (Ctrl-C to stop)", flush=True)
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        return child.wait()
    except KeyboardInterrupt:
        _stop(child)
        print("graphviz-app: stopped.", flush=True)
        return 0
    finally:
        signal.signal(signal.SIGTERM, previous)


def _startup_problem(*, host: str, port: int) -> tuple[str, int] | None:
    """Why the server cannot start here (a sentence saying what to do, an exit code), or None."""
    if not 0 < port < 65536:
        return f"--port must be between 1 and 65535, got {port}", 2
    if importlib.util.find_spec("streamlit") is None:
        return "Streamlit is not installed; install the web extra: pip install 'graphviz-app[web]'", 3
    if not APP_PATH.is_file():
        return f"the page script {APP_PATH} is missing; reinstall graphviz-app", 3
    try:
        with socket.socket(_family(host), socket.SOCK_STREAM) as s:
            s.bind((host, port))
    except OSError as e:
        return (
            f"cannot listen on {host}:{port} ({e.strerror}): is another server running there? "
            "Stop it, or pass --port N to use another port", 3,
        )
    return None


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def _display_url(host: str, port: int) -> str:
    shown = "localhost" if host in ("127.0.0.1", "localhost", "::1") else host
    if ":" in shown:
        shown = f"[{shown}]"
    return f"http://{shown}:{port}"


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _stop(child: subprocess.Popen[bytes]) -> None:
    """Stop Streamlit as Ctrl-C would, then harder if it does not go."""
    # From a terminal the child got the same SIGINT already; from a service
    # manager or a test only we did, so pass it on.
    if child.poll() is None:
        child.send_signal(signal.SIGINT)
    for sig in (None, signal.SIGTERM, signal.SIGKILL):
        if sig is not None and child.poll() is None:
            os.kill(child.pid, sig)
        try:
            child.wait(timeout=_STOP_GRACE_S)
            return
        except subprocess.TimeoutExpired:
            continue
        except KeyboardInterrupt:  # a second Ctrl-C: stop waiting politely
            continue
