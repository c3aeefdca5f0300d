"""Check a whole model's backward module by module against finite differences, and name the module that is wrong."""

from __future__ import annotations

from .run import check_model

__all__ = ["check_model"]
