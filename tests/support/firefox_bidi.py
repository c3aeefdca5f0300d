"""Debian's firefox-esr, headless, driven over WebDriver BiDi (built into Firefox: no geckodriver, no download)."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from websockets.sync.client import ClientConnection, connect

FIREFOX = "/usr/bin/firefox-esr"
# Everything Firefox would fetch on its own, turned off: then the only request logged is the page's.
PREFS = {
    "app.update.enabled": False, "app.update.auto": False, "app.normandy.enabled": False,
    "browser.shell.checkDefaultBrowser": False, "browser.startup.page": 0,
    "browser.startup.homepage_override.mstone": "ignore", "browser.aboutwelcome.enabled": False,
    "browser.newtabpage.enabled": False, "browser.newtabpage.activity-stream.feeds.system.topstories": False,
    "browser.newtabpage.activity-stream.feeds.section.topstories": False,
    "browser.newtabpage.activity-stream.showSponsored": False, "browser.topsites.contile.enabled": False,
    "browser.safebrowsing.malware.enabled": False, "browser.safebrowsing.phishing.enabled": False,
    "browser.safebrowsing.blockedURIs.enabled": False, "browser.safebrowsing.downloads.enabled": False,
    "browser.safebrowsing.downloads.remote.enabled": False, "browser.safebrowsing.provider.mozilla.updateURL": "",
    "browser.search.update": False, "browser.region.network.url": "", "browser.ping-centre.telemetry": False,
    "datareporting.policy.dataSubmissionEnabled": False, "datareporting.healthreport.uploadEnabled": False,
    "toolkit.telemetry.enabled": False, "toolkit.telemetry.unified": False, "toolkit.telemetry.server": "",
    "network.captive-portal-service.enabled": False, "network.connectivity-service.enabled": False,
    "network.dns.disablePrefetch": True, "network.prefetch-next": False, "network.http.speculative-parallel-limit": 0,
    "extensions.update.enabled": False, "extensions.getAddons.cache.enabled": False,
    "extensions.systemAddon.update.enabled": False, "services.settings.server": "data:,",
    "messaging-system.rsexperimentloader.enabled": False, "app.shield.optoutstudies.enabled": False,
    "geo.provider.network.url": "", "media.gmp-manager.url": "", "security.OCSP.enabled": 0,
}
PORT_FILE = "WebDriverBiDiServer.json"  # Firefox writes the port it listens on here, in the profile


class BidiError(RuntimeError):
    """A WebDriver BiDi command failed, or Firefox did not answer in time."""


class Firefox:
    """One BiDi session: commands in order, every event kept in `events` as (method, params)."""

    def __init__(self, ws: ClientConnection, *, timeout: float) -> None:
        self._ws, self._timeout, self._ids = ws, timeout, itertools.count(1)
        self.events: list[tuple[str, dict[str, Any]]] = []

    def command(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send one command; keep the events that arrive before its answer; return its result."""
        ident = next(self._ids)
        self._ws.send(json.dumps({"id": ident, "method": method, "params": params or {}}))
        deadline = time.monotonic() + self._timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BidiError(f"Firefox did not answer {method} within {self._timeout:g} s")
            try:
                message = json.loads(self._ws.recv(timeout=left))
            except TimeoutError:
                continue
            if message.get("type") == "event":
                self.events.append((message["method"], message["params"]))
            elif message.get("id") == ident:
                if message.get("type") == "error":
                    raise BidiError(f"{method} failed: {message.get('error')}: {message.get('message')}")
                return message["result"]

    def open(self, url: str) -> str:
        """Navigate the first tab to `url`, waiting for its load; return the tab's context id.

        The events logged so far are dropped first: `requests()` then tells what this page asked for.
        """
        self.events.clear()
        context = self.command("browsingContext.getTree")["contexts"][0]["context"]
        self.command("browsingContext.navigate", {"context": context, "url": url, "wait": "complete"})
        return context

    def evaluate(self, context: str, expression: str) -> Any:
        """The JSON value of `expression` in the page (the expression must give a JSON-able value)."""
        result = self.command("script.evaluate", {
            "expression": f"JSON.stringify({expression})", "target": {"context": context}, "awaitPromise": True})
        if result["type"] == "exception":
            raise BidiError(f"{expression} threw: {result['exceptionDetails'].get('text')}")
        return json.loads(result["result"]["value"])

    def wait_for(self, context: str, expression: str, *, timeout: float, what: str) -> None:
        """Poll `expression` in the page until it is true; fail saying `what` did not happen in `timeout` s."""
        deadline = time.monotonic() + timeout
        while not self.evaluate(context, expression):
            if time.monotonic() > deadline:
                raise AssertionError(f"{what} did not happen within {timeout:g} s in Firefox")
            time.sleep(0.1)

    def requests(self) -> list[str]:
        """Every URL the browser asked for since the last `open`, in order (Firefox reports http(s) and ws loads)."""
        return [p["request"]["url"] for m, p in self.events if m == "network.beforeRequestSent"]

    def page_errors(self) -> list[str]:
        """Uncaught script errors and console.error lines."""
        return [p.get("text", "") for m, p in self.events if m == "log.entryAdded" and p.get("level") == "error"]

    def dialogs(self) -> list[str]:
        """The messages of alert(), confirm(), prompt(): what an injected script would call."""
        return [p.get("message", "") for m, p in self.events if m == "browsingContext.userPromptOpened"]


def _port(profile: Path, process: subprocess.Popen[bytes], timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise BidiError(f"firefox-esr exited with status {process.returncode} before listening for WebDriver BiDi")
        try:
            return int(json.loads((profile / PORT_FILE).read_text())["ws_port"])
        except (FileNotFoundError, ValueError, KeyError):
            time.sleep(0.1)
    raise BidiError(f"firefox-esr did not start WebDriver BiDi within {timeout:g} s (no {PORT_FILE} in its profile)")


@contextmanager
def firefox(*, timeout: float = 120.0) -> Iterator[Firefox]:
    """A headless firefox-esr on a fresh profile, with a BiDi session logging requests, errors and dialogs.

    Firefox is killed and its profile removed on the way out, whatever happened.
    """
    profile = Path(tempfile.mkdtemp(prefix="gv-firefox-"))
    process: subprocess.Popen[bytes] | None = None
    try:
        (profile / "user.js").write_text("".join(f"user_pref({json.dumps(k)}, {json.dumps(v)});\n"
                                                 for k, v in PREFS.items()))
        # Port 0: Firefox picks a free one and writes it into the profile (two runs at once do not clash).
        process = subprocess.Popen(
            [FIREFOX, "--headless", "--no-remote", "--remote-debugging-port=0", "--profile", str(profile),
             "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        port = _port(profile, process, timeout)
        with connect(f"ws://127.0.0.1:{port}/session", open_timeout=timeout, max_size=None) as ws:
            browser = Firefox(ws, timeout=timeout)
            browser.command("session.new", {"capabilities": {}})
            browser.command("session.subscribe", {"events": [
                "network.beforeRequestSent", "log.entryAdded", "browsingContext.userPromptOpened"]})
            yield browser
    finally:
        if process is not None:
            os.killpg(process.pid, signal.SIGKILL)  # its own group: the content processes go too
            process.wait(timeout=30)
        shutil.rmtree(profile, ignore_errors=True)
