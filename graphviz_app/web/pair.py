"""Two graphs compared on the page (two saved files, or two programs): the record the worker returns, the names."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePath

__all__ = ["SavedPair", "pair_labels"]


@dataclass(frozen=True, slots=True)
class SavedPair:
    """Two graphs aligned by `diff()`, for the synced panes: two uploaded files, or the graphs of two programs.

    `viewer` is the compare data (`graphviz_app.viewer.compare.compare_payload`, encoded: base64 of
    gzipped JSON), sent to the browser once; `summary` the diff's first line; `labels` the panes' names.
    """

    summary: str
    viewer: str
    labels: tuple[str, str]
    node_counts: tuple[int, int]
    seconds: float


def pair_labels(name_a: str, name_b: str) -> tuple[str, str]:
    """The panes' names: the files' names without ``.json``, told apart when they are the same.

    >>> pair_labels("fp32.json", "bf16.json")
    ('fp32', 'bf16')
    >>> pair_labels("run/g.json", "g.json")
    ('g (first)', 'g (second)')
    """
    a, b = (_stem(n) for n in (name_a, name_b))
    if a == b:
        return f"{a} (first)", f"{b} (second)"
    return a, b


def _stem(name: str) -> str:
    base = PurePath(name.replace("\\", "/")).name
    stem = base[:-5] if base.lower().endswith(".json") else base
    return stem.strip() or "graph"
