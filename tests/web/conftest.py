"""Web-suite fixtures: a server started like `make run`, a headless Chromium logging requests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from web_support import CHROMIUM, CHROMIUM_ARGS, Server


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    srv = Server()
    try:
        yield srv
    finally:
        srv.stop()


# A headless Chromium that logs every request ----------------------------------
@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="module")
def request_log() -> list[str]:
    """Every URL (requests and websockets) any page of this module opened."""
    return []


@pytest.fixture
def page(browser, request_log: list[str]) -> Iterator[object]:  # noqa: ANN001
    context = browser.new_context(viewport={"width": 1400, "height": 1900})
    pg = context.new_page()
    pg.set_default_timeout(180_000)  # bounds a hang: a fresh server's first graph on a busy machine is slow
    pg.on("request", lambda r: request_log.append(r.url))
    pg.on("websocket", lambda ws: request_log.append(ws.url))
    try:
        yield pg
    finally:
        context.close()
