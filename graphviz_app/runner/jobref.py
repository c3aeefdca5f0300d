"""A job named by module and function, so the process that submits it never imports it."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

__all__ = ["JobRef"]


@dataclass(frozen=True, slots=True)
class JobRef:
    """`module:function`, imported and called where the job runs (in the isolated worker).

    It pickles as two strings: the web server names its jobs this way and never
    imports the worker side (which imports torch).

    >>> job = JobRef("math", "hypot")
    >>> str(job), job(3.0, 4.0)
    ('math:hypot', 5.0)
    """

    module: str
    function: str

    def __str__(self) -> str:
        return f"{self.module}:{self.function}"

    def resolve(self) -> Any:
        """The function itself (imports its module).

        Raises:
            LookupError: the module or the function does not exist.
        """
        try:
            return getattr(importlib.import_module(self.module), self.function)
        except (ImportError, AttributeError) as e:
            raise LookupError(f"job {self} does not exist: {e}") from e

    def __call__(self, *args: Any) -> Any:
        return self.resolve()(*args)
