"""A real JupyterLab server for the notebook tests: a free local port, a token, every file in a temp folder, stopped
with its kernels however the test ends."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from waiting import wait_until

__all__ = ["KERNEL_NAME", "Lab", "jupyterlab"]

KERNEL_NAME = "Python 3 (graphviz-app tests)"  # the python3 kernel's name as JupyterLab shows it

# JupyterLab's own settings for a test: no news or update check (a request to the internet), no toasts over
# the notebook.
_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings":
        {"fetchNews": "false", "checkForUpdates": False, "doNotDisturbMode": True},
}


@dataclass(frozen=True)
class Lab:
    """A running server: `url` ends in "/", notebooks live in `root`."""

    url: str
    token: str
    root: Path

    def tree(self, name: str, *, workspace: str = "") -> str:
        """The address that opens notebook `name` (in `root`) in JupyterLab; in a `workspace` of its own when named
        (no tab of another test's notebook restored beside it)."""
        place = f"workspaces/{workspace}/" if workspace else ""
        return f"{self.url}lab/{place}tree/{name}?token={self.token}"

    def api(self, path: str, method: str = "GET") -> Any:
        """The server's REST answer at `path` (like "api/sessions"), as JSON (None when empty)."""
        request = urllib.request.Request(self.url + path, method=method,
                                         headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(request, timeout=60) as answer:
            body = answer.read()
        return json.loads(body) if body else None


@contextmanager
def jupyterlab(folder: Path, *, python_path: Sequence[str], start_timeout: float = 240) -> Iterator[Lab]:
    """Start `python -m jupyterlab` with config, data, runtime and notebooks under `folder`, on 127.0.0.1 at a port
    the system picks; its kernels import from `python_path` first. Stopped (server, then any kernel left) on exit.

    `start_timeout` bounds a hang of the start on a busy machine; it measures nothing.
    """
    import psutil

    dirs = {name: folder / name for name in ("config", "data", "runtime", "notebooks")}
    for path in dirs.values():
        path.mkdir(parents=True, exist_ok=True)
    # The python3 kernel is this Python, whatever other kernels the machine has: JUPYTER_PATH is looked in first (in
    # a virtualenv, JUPYTER_DATA_DIR comes after the environment's own).
    spec = dirs["data"] / "kernels" / "python3" / "kernel.json"
    spec.parent.mkdir(parents=True, exist_ok=True)
    spec.write_text(json.dumps({"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                                "display_name": KERNEL_NAME, "language": "python"}))
    for name, values in _SETTINGS.items():
        target = dirs["config"] / "lab" / "user-settings" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(values))
    token = secrets.token_hex(16)
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(dirs["config"]), JUPYTER_DATA_DIR=str(dirs["data"]),
               JUPYTER_RUNTIME_DIR=str(dirs["runtime"]), JUPYTERLAB_SETTINGS_DIR=str(dirs["config"] / "lab" /
                                                                                    "user-settings"),
               JUPYTERLAB_WORKSPACES_DIR=str(dirs["config"] / "lab" / "workspaces"),
               JUPYTER_PATH=os.pathsep.join([str(dirs["data"]), os.environ.get("JUPYTER_PATH", "")]).rstrip(os.pathsep),
               PYTHONPATH=os.pathsep.join([*python_path, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    log = (folder / "server.log").open("wb")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", "--ServerApp.ip=127.0.0.1",
         "--ServerApp.port=0", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={dirs['notebooks']}",
         "--ServerApp.terminals_enabled=False", "--LabApp.extension_manager=readonly"],
        env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    owned = psutil.Process(server.pid)
    try:
        info = dirs["runtime"] / f"jpserver-{server.pid}.json"

        def started() -> bool:
            if server.poll() is not None:
                raise AssertionError(f"JupyterLab exited with {server.returncode}: {_tail(folder / 'server.log')}")
            return info.exists() and info.stat().st_size > 0

        wait_until(started, timeout=start_timeout, what="JupyterLab writing its server file")
        port = json.loads(info.read_text())["port"]
        lab = Lab(f"http://127.0.0.1:{port}/", token, dirs["notebooks"])

        def answers() -> bool:
            try:
                return lab.api("api/status") is not None
            except OSError:
                return False

        wait_until(answers, timeout=start_timeout, what="JupyterLab answering on its port")
        yield lab
    finally:
        try:  # its kernels, found while it runs: each runs in a session of its own, so the server's end may not end it
            kernels = set(owned.children(recursive=True))
        except psutil.NoSuchProcess:
            kernels = set()
        server.terminate()
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(30)
        for kernel in kernels:
            try:
                kernel.kill()
                kernel.wait(30)
            except psutil.NoSuchProcess:
                pass
        log.close()


def _tail(path: Path) -> str:
    return path.read_text(errors="replace")[-3000:]
