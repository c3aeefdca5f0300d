"""The command line's exit codes, and a failure already worded for people."""

from __future__ import annotations

__all__ = ["EXIT_BAD_INPUT", "EXIT_CHECK_FAILED", "EXIT_ENVIRONMENT", "EXIT_OK", "Failure"]

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_ENVIRONMENT = 3


class Failure(Exception):
    """A failure already worded for people, with its exit code."""

    def __init__(self, message: str, code: int = EXIT_BAD_INPUT) -> None:
        super().__init__(message)
        self.code = code
