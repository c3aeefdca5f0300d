"""The JavaScript unit tests' payloads are what `payload()` makes now (no browser, no node needed)."""

from __future__ import annotations

import pytest
from js_fixtures import FIXTURES, fixtures, text


@pytest.mark.parametrize("name", sorted(fixtures()))
def test_the_js_unit_tests_read_the_payload_python_writes_today(name: str) -> None:
    path = FIXTURES / name
    assert path.is_file(), f"{path} is missing: run `python tests/support/js_fixtures.py`"
    assert path.read_text(encoding="utf-8") == text(fixtures()[name]), (
        f"{path} is out of date with payload(): run `python tests/support/js_fixtures.py`, "
        "then `npm test` in graphviz_app/viewer")
