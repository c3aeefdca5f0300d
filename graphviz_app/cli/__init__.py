"""The command line: `graphviz-app render | check | serve` (also `python -m graphviz_app.cli`)."""

from __future__ import annotations

from .commands import EXIT_BAD_INPUT, EXIT_CHECK_FAILED, EXIT_ENVIRONMENT, EXIT_OK, build_parser, main

__all__ = ["main", "build_parser", "EXIT_OK", "EXIT_CHECK_FAILED", "EXIT_BAD_INPUT", "EXIT_ENVIRONMENT"]
