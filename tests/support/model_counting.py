"""A node tuple that counts how often it is walked: an operation count for lookups, in place of a timing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

__all__ = ["CountingNodes"]


class CountingNodes(tuple):
    """Behaves as the tuple it holds; `CountingNodes.walks` counts the walks from its start (reset it first)."""

    walks = 0

    def __iter__(self) -> Iterator[Any]:
        type(self).walks += 1
        return super().__iter__()
