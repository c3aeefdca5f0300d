"""`assert_gradients`: a one-line gradient check for a user's own test suite."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gradcheck.checker import check
from gradcheck.errors import GradientAssertionError
from gradcheck.report import Report

__all__ = ["assert_gradients"]


def assert_gradients(
    fn: Callable[..., Any], inputs: Any, *, expected: Any = None, **options: Any
) -> Report:
    """Asserts fn's gradients agree with finite differences (and with `expected`).

    Args:
        fn: the function to check, as for `check`.
        inputs: a tensor or a tuple of tensors.
        expected: the hand-derived gradient, as for `check` (optional).
        **options: any keyword option of `check`: eps, atol, rtol, device, dtype, fast, ...

    Returns:
        The passing Report, for further assertions.

    Raises:
        GradientAssertionError: an AssertionError whose message is the readable report
            and whose `.report` is the Report, when any gradient disagrees.

    Example:
        >>> import torch
        >>> x = torch.tensor([0.0, 1.0, 2.0], requires_grad=True)
        >>> _ = assert_gradients(lambda x: (x**2).sum(), x, expected=lambda x: 2 * x)
    """
    __tracebackhide__ = True  # pytest shows the report, not this function's source
    if "raise_exception" in options:
        raise TypeError(
            "assert_gradients always raises on failure (an AssertionError); "
            "drop raise_exception, or call check(..., raise_exception=...) instead"
        )
    report = check(fn, inputs, expected=expected, **options)
    if not report.passed:
        raise GradientAssertionError(report)
    return report
