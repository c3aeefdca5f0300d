"""A long integer literal, opened as a link or run in the worker, gets the language's message, not a bug page."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest
from web_support import new_app, shown

from graphviz_app.runner import IsolatedRunner
from graphviz_app.web import service
from graphviz_app.web.results import Failure
from graphviz_app.web.urlstate import Options

HEX = "x = 0x" + "f" * 3600 + "\nx"
OCTAL = "x = 0o" + "7" * 5000 + "\nx"
BINARY = "x = 0b" + "1" * 9000 + "\nx"
DECIMAL = "x = " + "9" * 4301 + "\nx"
LITERALS = [HEX, OCTAL, BINARY, DECIMAL]
BASES = ["hex", "octal", "binary", "decimal"]
MESSAGE = "integers must fit in 64 bits"


@pytest.fixture(scope="module")
def runner() -> Iterator[IsolatedRunner]:
    with replace(service.SETTINGS, workers=1, max_workers=1, time_limit=60.0).start() as r:
        yield r


@pytest.mark.parametrize("program", LITERALS, ids=BASES)
def test_the_worker_answers_a_long_literal_with_the_language_message(runner: IsolatedRunner, program: str) -> None:
    result = service.analyze(runner, program, Options())
    assert isinstance(result, Failure)
    assert result.kind == "limit", result.message
    assert MESSAGE in result.message and (result.line, result.col) == (1, 5)


@pytest.mark.slow
@pytest.mark.parametrize("program", LITERALS, ids=BASES)
def test_a_link_holding_a_long_literal_opens_the_page_with_the_message(program: str) -> None:
    at = new_app({"program": program})
    assert not at.exception
    errors = shown(at, "error")
    assert errors and all("This is a bug" not in e and "Something went wrong" not in e for e in errors), errors
    assert any(MESSAGE in e and "line 1" in e for e in errors), errors
    assert at.session_state["submitted"] == program  # the link's program stays on the page, to be fixed
