"""The tests mirror the package, and their shared helpers have one home: tests/support."""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
SUPPORT = TESTS / "support"
# Folders of data beside the tests, not tests of a module; artifacts/ holds the screenshots the browser tests
# write as they run (git-ignored), so it exists or not depending on what ran first.
DATA = {"golden", "__pycache__", "artifacts"}


def _test_folders() -> list[Path]:
    return sorted(
        folder for folder in TESTS.rglob("*")
        if folder.is_dir() and not folder.is_relative_to(SUPPORT) and not DATA & set(folder.relative_to(TESTS).parts)
    )


@pytest.mark.parametrize("folder", _test_folders(), ids=lambda f: str(f.relative_to(TESTS)))
def test_each_test_folder_is_named_after_a_package_or_module(folder: Path) -> None:
    parts = folder.relative_to(TESTS).parts
    under = ROOT.joinpath(*parts) if parts[0] == "gradcheck" else ROOT.joinpath("graphviz_app", *parts)
    assert under.is_dir() or under.with_suffix(".py").is_file(), (
        f"tests/{'/'.join(parts)} tests no module: put a test beside the module it tests "
        f"(tests/drawing for graphviz_app/drawing/...), and shared helpers in tests/support"
    )


def test_helpers_live_in_support_and_test_files_in_their_folders() -> None:
    stray = [
        str(path.relative_to(TESTS)) for path in TESTS.rglob("*.py")
        if not path.is_relative_to(SUPPORT) and path.name != "conftest.py" and not path.name.startswith("test_")
    ]
    assert stray == [], f"helpers outside tests/support (the root conftest puts only that folder on sys.path): {stray}"
