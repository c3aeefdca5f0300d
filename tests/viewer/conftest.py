"""Viewer-suite fixtures: graphs to show, and a headless Chromium that logs every request."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from viewer_support import CHROMIUM, CHROMIUM_ARGS


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser) -> Iterator[object]:  # noqa: ANN001
    context = browser.new_context(viewport={"width": 1300, "height": 900})
    pg = context.new_page()
    pg.set_default_timeout(60_000)
    pg.requests = []  # every URL the page asked for
    pg.errors = []  # uncaught script errors
    pg.dialogs = []  # alert(), confirm(): what an injected script would call
    pg.on("request", lambda r: pg.requests.append(r.url))
    pg.on("pageerror", lambda e: pg.errors.append(str(e)))
    pg.on("dialog", lambda d: (pg.dialogs.append(d.message), d.dismiss()))
    try:
        yield pg
    finally:
        context.close()
