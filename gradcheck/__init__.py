"""Gradient checker: autograd and hand-derived gradients against finite differences.

The public names load lazily, so importing the pytest plugin does not import torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from gradcheck import _format  # noqa: F401 - gives Report its readable text (neither imports torch)

if TYPE_CHECKING:
    from gradcheck.assertions import assert_gradients
    from gradcheck.checker import check
    from gradcheck.devices import DeviceComparison, compare_devices
    from gradcheck.errors import (
        CheckMemoryError,
        DeviceError,
        GradcheckError,
        GradcheckWarning,
        GradientAssertionError,
        GradientMismatchError,
        InputError,
        ShapeMismatchError,
    )
    from gradcheck.report import (
        Blame,
        Check,
        Comparison,
        Element,
        MemoryInfo,
        PairReport,
        Report,
        TensorSummary,
        Timings,
    )

__all__ = [
    "check",
    "compare_devices",
    "assert_gradients",
    "Report",
    "PairReport",
    "Element",
    "Comparison",
    "TensorSummary",
    "Timings",
    "MemoryInfo",
    "Blame",
    "Check",
    "DeviceComparison",
    "GradcheckError",
    "InputError",
    "ShapeMismatchError",
    "DeviceError",
    "CheckMemoryError",
    "GradientMismatchError",
    "GradientAssertionError",
    "GradcheckWarning",
]

_HOME = {
    "check": "checker",
    "compare_devices": "devices",
    "DeviceComparison": "devices",
    "assert_gradients": "assertions",
    **dict.fromkeys(
        [
            "Report",
            "PairReport",
            "Element",
            "Comparison",
            "TensorSummary",
            "Timings",
            "MemoryInfo",
            "Blame",
            "Check",
        ],
        "report",
    ),
    **dict.fromkeys(
        [
            "GradcheckError",
            "InputError",
            "ShapeMismatchError",
            "DeviceError",
            "CheckMemoryError",
            "GradientMismatchError",
            "GradientAssertionError",
            "GradcheckWarning",
        ],
        "errors",
    ),
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(
            f"module 'gradcheck' has no attribute {name!r}; its public names are {__all__}"
        )
    value = getattr(importlib.import_module(f".{home}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
