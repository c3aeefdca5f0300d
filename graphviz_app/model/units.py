"""Byte counts as people read them."""

from __future__ import annotations

__all__ = ["human_bytes"]


def human_bytes(n: int) -> str:
    """Bytes as people read them.

    >>> human_bytes(12), human_bytes(2048), human_bytes(3 * 1024**3)
    ('12 B', '2.0 KiB', '3.0 GiB')
    """
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")
