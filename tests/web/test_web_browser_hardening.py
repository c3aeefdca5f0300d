"""What a person sees in Chromium: link warnings that stay readable, an honest time-out."""

from __future__ import annotations

import time
from collections.abc import Iterator
from urllib.parse import quote

import pytest
from web_support import Server, screenshot

pytestmark = pytest.mark.browser

OTHER = "y = torch.ones(2, requires_grad=True)\n(y * 5).sum()"
# About 3 s an op, a thousand times: runs into the time limit, whatever the load.
RUNAWAY = "a = torch.randn(400, 20000)\nfor i in range(1000):\n    b = torch.cdist(a, a, p=1).sum()\nb  # alone"


def graph_node(page, name: str):  # noqa: ANN001, ANN201
    return page.locator("[data-testid=graph-viewer][data-state=ready] [data-node]", has_text=name).first


def test_a_bad_link_parameter_stays_in_view_until_an_option_changes(page, server) -> None:  # noqa: ANN001
    page.goto(f"{server.url}/?program={quote(OTHER)}&dtype=float8")
    graph_node(page, "MulBackward0").wait_for()
    page.wait_for_timeout(3000)  # the editor's first report of its text has rerun the page by now
    warning = page.locator("[data-testid='stAlertContentWarning']", has_text="ignored ?dtype=float8")
    assert warning.count() == 1 and warning.is_visible()
    screenshot(page, "web-hardening-link-warning")
    page.get_by_text("Show op attributes").click()
    warning.wait_for(state="detached")


def test_a_runaway_program_alone_is_told_to_shrink_not_to_try_again(page, server) -> None:  # noqa: ANN001
    page.goto(f"{server.url}/?program={quote(RUNAWAY)}")
    alert = page.locator("[data-testid='stAlertContentError']", has_text="a retry will not help")
    alert.wait_for(timeout=90_000)
    page.get_by_text("Make the program smaller").wait_for()
    assert page.get_by_text("press Run to try again").count() == 0
    screenshot(page, "web-hardening-overtime")


@pytest.fixture(scope="module")
def patient_server() -> Iterator[Server]:
    """A server whose time limit (60 s) is far longer than the test waits."""
    srv = Server(time_limit_s=60)
    try:
        yield srv
    finally:
        srv.stop()


def editor_while_running(page, server: Server, program: str):  # noqa: ANN001, ANN201
    """Open a link to `program`; once it runs, the editor, focused."""
    page.goto(f"{server.url}/?program={quote(program)}")
    page.get_by_text("Running the program").wait_for()
    editor = page.get_by_test_id("program-editor")
    editor.click()
    return editor


def test_pressing_run_on_a_new_program_stops_the_running_one(page, patient_server) -> None:  # noqa: ANN001
    editor = editor_while_running(page, patient_server, RUNAWAY)
    start = time.monotonic()
    editor.press("Control+a")
    editor.press("Delete")
    editor.press_sequentially(OTHER)
    page.get_by_role("button", name="Run", exact=True).click()
    # Without the stop, the new program would wait for the runaway's 60 s time limit.
    graph_node(page, "MulBackward0").wait_for(timeout=40_000)
    assert time.monotonic() - start < 40
    assert page.get_by_text("all 4 workers are busy").count() == 0
    screenshot(page, "web-hardening-replaced-run")


# Four ops of ~1.5 s each: long enough to type into the editor while it runs, well
# within the language's own 10 s limit.
SLOW = ("w = torch.ones(1, requires_grad=True)\na = torch.randn(400, 10000)\n"
        "for i in range(4):\n    b = torch.cdist(a, a, p=1).sum() * w\nb")


def test_typing_while_a_program_runs_does_not_start_it_again(page, patient_server) -> None:  # noqa: ANN001
    editor = editor_while_running(page, patient_server, SLOW)
    start = time.monotonic()
    editor.press("End")
    for ch in "  # typing":  # each pause lets the editor rerun the page
        editor.press_sequentially(ch)
        page.wait_for_timeout(250)
    typing = time.monotonic() - start
    caption = page.locator("[data-testid='stCaptionContainer']", has_text="nodes,").first
    caption.wait_for(timeout=50_000)
    shown_after = time.monotonic() - start
    job = float(caption.inner_text().rsplit("· ", 1)[1].removesuffix(" ms")) / 1e3
    assert job > typing, "the program finished before the typing ended: make SLOW slower"
    # Started again after the last keystroke, it would show no sooner than typing + job.
    assert shown_after < job + typing / 2
