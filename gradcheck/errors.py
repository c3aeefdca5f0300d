"""The exceptions the gradient checker raises, in one place.

Hierarchy::

    GradcheckError (RuntimeError)
    ├── InputError (also ValueError): inputs, outputs or options the checker cannot use
    │   └── ShapeMismatchError: an `expected` gradient of the wrong shape or count
    ├── DeviceError: a device that does not exist here, or tensors on mixed devices
    ├── CheckMemoryError: out of memory even at the smallest chunk (has `.report`)
    └── GradientMismatchError: gradients disagree and `raise_exception=True` (has `.report`)

    GradientAssertionError (AssertionError): raised by `assert_gradients` (has `.report`)

    GradcheckWarning (UserWarning): issued by `check(..., kinks="warn")` when a kink was accepted

An exception raised by the user's own function is never wrapped, with one
exception: PyTorch's "Expected all tensors to be on the same device" becomes a
`DeviceError` that says which tensor is where (the original is its `__cause__`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gradcheck.report import Report

__all__ = [
    "GradcheckError",
    "InputError",
    "ShapeMismatchError",
    "DeviceError",
    "CheckMemoryError",
    "GradientMismatchError",
    "GradientAssertionError",
    "GradcheckWarning",
]


class GradcheckError(RuntimeError):
    """Base class of every error the gradient checker raises on purpose."""


class InputError(GradcheckError, ValueError):
    """The inputs, the function's outputs or an option cannot be checked as given."""


class ShapeMismatchError(InputError):
    """An `expected` gradient does not have the shape of the Jacobian it stands for."""


class DeviceError(GradcheckError):
    """A device is unavailable, or tensors that must share a device do not."""


class _WithReport(GradcheckError):
    """A check ran to the end and its `Report` says why it did not pass."""

    def __init__(self, report: Report) -> None:
        super().__init__(str(report))
        self.report = report


class CheckMemoryError(_WithReport):
    """The check ran out of memory even after halving its chunk down to one element."""


class GradientMismatchError(_WithReport):
    """Gradients disagree and `check(..., raise_exception=True)` was asked for."""


class GradientAssertionError(AssertionError):
    """`assert_gradients` failed; the message is the readable report, `.report` the data."""

    def __init__(self, report: Report) -> None:
        super().__init__(str(report))
        self.report = report


class GradcheckWarning(UserWarning):
    """A check passed with something a person should know: `kinks="warn"` accepted a kink."""
