"""Helpers for the web page's tests: AppTest probes, a server started like `make run`, screenshots."""

from __future__ import annotations

import base64
import gzip
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "graphviz_app" / "web" / "app.py"
ARTIFACTS = ROOT / "tests" / "artifacts"
CHROMIUM = "/usr/bin/chromium"
SERVE_MODULE = "graphviz_app.cli"  # started as `make run` starts it
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]


# AppTest helpers --------------------------------------------------------------
def new_app(query: dict[str, str] | None = None):  # noqa: ANN201 - AppTest
    """The page under AppTest, optionally opened from a link's query."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(APP), default_timeout=120)
    for key, value in (query or {}).items():
        at.query_params[key] = value
    return at.run()


def components(at, name: str) -> list:  # noqa: ANN001
    """The page's custom components called `graphviz_app.<name>`, in page order."""
    return [e for e in at.get("bidi_component") if e.proto.component_name == f"graphviz_app.{name}"]


def viewer_element(at) -> dict | None:  # noqa: ANN001
    """What the page sends the graph viewer (payload, key, fragment), or None when there is no graph."""
    viewers = components(at, "viewer")
    return json.loads(viewers[0].proto.json) if viewers else None


def decode_viewer(text: str) -> dict:
    """The viewer's data (`Analysis.viewer`: base64 of gzipped JSON, long columns packed) as a dict of lists."""
    from graphviz_app.viewer.packing import unpack

    found: dict = unpack(json.loads(gzip.decompress(base64.b64decode(text))))
    return found


def shown_payload(at) -> dict | None:  # noqa: ANN001
    """The viewer's data the page sends (graphviz_app.viewer's payload, decoded), or None when there is no graph."""
    element = viewer_element(at)
    return None if element is None else decode_viewer(element["payload"])


def opened_modules(data: dict) -> set[str]:
    """The modules whose boxes the viewer opens on (the root as "")."""
    tree = data["tree"]
    return {tree["module"][g] for g in data["open"] if tree["kind"][g] in ("root", "module")}


def report_view(at, view: str) -> None:  # noqa: ANN001
    """As the viewer in the browser does when a person opens a box: its view goes to the page."""
    key = components(at, "viewer")[0].key
    at.session_state[key] = {"view": view}


def shown_graph(at):  # noqa: ANN001, ANN201
    """The graph the viewer shows (a `Graph`), or None when there is no graph."""
    from graphviz_app.model import Graph

    data = shown_payload(at)
    return None if data is None else Graph.from_dict(data["graph"])


def shown_names(at) -> set[str]:  # noqa: ANN001
    """The names of the nodes in the graph the viewer shows (empty when there is none)."""
    graph = shown_graph(at)
    return set() if graph is None else {n.name for n in graph.nodes}


def box_labels(at) -> list[str]:  # noqa: ANN001
    """The labels of the viewer's boxes (modules, rolls, folds, parts) for the graph shown."""
    data = shown_payload(at)
    return [] if data is None else list(data["tree"]["label"])


def type_program(at, text: str) -> None:  # noqa: ANN001
    """Type `text` into the editor as a person would (the editor reports it while typing)."""
    at.session_state[f"editor-{at.session_state['editor_rev']}"] = {"value": text}


def shown(at, kind: str, *, where: str = "main") -> list[str]:  # noqa: ANN001
    """The texts of one kind of element (error, success, caption, ...) as a person reads them.

    The page escapes Markdown in messages; this undoes the escapes.
    """
    root = at.sidebar if where == "sidebar" else at
    return [re.sub(r"\\(.)", r"\1", str(e.value)) for e in getattr(root, kind)]


def page_text(at) -> str:  # noqa: ANN001
    """Every message, caption and markdown on the page, one per line."""
    kinds = ("error", "warning", "info", "success", "caption", "markdown")
    return "\n".join(t for kind in kinds for t in shown(at, kind))


# A running server, started the way `make run` starts it -----------------------
class OutboundTrap:
    """A do-nothing HTTP proxy on localhost: the server's HTTP(S)_PROXY during tests.

    Python's HTTP clients send every outside request through it, so any
    request the server makes to another host is recorded here.
    """

    def __init__(self) -> None:
        self.requests: list[str] = []
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen()
        self.port = self._sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(2)
                try:
                    self.requests.append(conn.recv(1024).split(b"\r\n")[0].decode(errors="replace"))
                except OSError:
                    self.requests.append("(connection without a request line)")

    def close(self) -> None:
        self._sock.close()


# Processes, through /proc -----------------------------------------------------
def descendants(pid: int) -> set[int]:
    """The processes below `pid`."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie has ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def worker_processes(pid: int) -> set[int]:
    """The program workers below process `pid`: the processes `multiprocessing` started there."""
    found = set()
    for child in descendants(pid):
        try:
            command = Path(f"/proc/{child}/cmdline").read_bytes()
        except OSError:
            continue
        if b"multiprocessing" in command and b"resource_tracker" not in command:
            found.add(child)
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(url: str, process: subprocess.Popen, log: Path, timeout: float = 90) -> None:
    """Wait until Streamlit answers its health check; fail with the server's log if it dies."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode}:\n{log.read_text(errors='replace')}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"the server did not answer within {timeout} s:\n{log.read_text(errors='replace')}")


class Server:
    """`python -m graphviz_app.cli serve --port N` as a child process."""

    def __init__(self, *, time_limit_s: float = 60.0) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.trap = OutboundTrap()
        self.log_path = ARTIFACTS / "web-server.log"  # the latest browser run's server
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        proxy = f"http://127.0.0.1:{self.trap.port}"
        env = {**os.environ, "GRAPHVIZ_APP_TIME_LIMIT": str(time_limit_s), "NO_PROXY": "", "no_proxy": ""}
        env.update({k: proxy for k in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy")})
        self._log = self.log_path.open("w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", SERVE_MODULE, "serve", "--host", "127.0.0.1", "--port", str(self.port)],
            cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT,
        )
        self._wait_healthy()

    def _wait_healthy(self) -> None:
        wait_healthy(self.url, self.process, self.log_path)

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def stop(self) -> int:
        """Ctrl-C, as a person stops it; returns the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
        self.trap.close()
        return self.process.returncode



# Streamlit marks its app root with the script's state ("running", "notRunning", ...): a run
# has ended each time the state leaves "running". Counted from before the page's own script.
_COUNT_RUNS = """
window.__scriptRunsEnded = 0;
new MutationObserver((records) => {
  for (const r of records) if (r.oldValue === "running") window.__scriptRunsEnded += 1;
}).observe(document, {subtree: true, attributes: true, attributeOldValue: true,
                      attributeFilter: ["data-test-script-state"]});
"""


def count_script_runs(page) -> None:  # noqa: ANN001
    """From the next page load on, count the runs of the page's script (call before `goto`)."""
    page.add_init_script(_COUNT_RUNS)


def script_runs_ended(page) -> int:  # noqa: ANN001
    """How many runs of the page's script have ended (see `count_script_runs`)."""
    return int(page.evaluate("window.__scriptRunsEnded"))


def wait_for_runs_after(page, ended: int) -> None:  # noqa: ANN001
    """Wait until a run of the page's script ended after `ended` had, and no run is going on."""
    page.wait_for_function(
        """(ended) => window.__scriptRunsEnded > ended &&
            document.querySelector("[data-testid='stApp']").getAttribute("data-test-script-state") !== "running"
        """,
        arg=ended,
    )


def settled_screenshot(locator, *, timeout: float = 30) -> bytes:  # noqa: ANN001
    """A PNG of `locator` once it stopped changing (two shots in a row alike): scrolling has settled."""
    previous = locator.screenshot()
    deadline = time.monotonic() + timeout
    while True:
        shot = locator.screenshot()
        if shot == previous:
            return shot
        if time.monotonic() > deadline:
            raise AssertionError(f"the element kept changing for {timeout:g} s")
        previous = shot


def screenshot(page, name: str, *, focus=None) -> Path:  # noqa: ANN001
    """Save what the person sees as tests/artifacts/<name>.png.

    Streamlit scrolls inside its own container, so a full-page shot shows
    only the viewport: pass `focus` (a locator) to scroll it into view first.
    """
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    if focus is not None:
        focus.scroll_into_view_if_needed()
    page.screenshot(path=str(path))
    return path
