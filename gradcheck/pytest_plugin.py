"""The pytest plugin: a `gradcheck` fixture and a `gradcheck(...)` marker for tolerances."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # torch is imported only when a test uses the fixture
    from gradcheck.report import Report

__all__ = ["GradientChecker", "gradcheck", "pytest_configure"]

_MARKER_HELP = (
    "gradcheck(**options): default options (eps, atol, rtol, device, dtype, fast) "
    "for the `gradcheck` fixture in this test, class or module"
)


def pytest_configure(config: pytest.Config) -> None:
    """Registers the `gradcheck` marker so `--strict-markers` accepts it."""
    config.addinivalue_line("markers", _MARKER_HELP)


class GradientChecker:
    """What the `gradcheck` fixture returns: `assert_gradients` with the marker's defaults.

    Calling it checks `fn` at `inputs` and raises `AssertionError` with the
    readable report when gradients disagree; it returns the `Report` otherwise.
    """

    __slots__ = ("defaults",)

    def __init__(self, defaults: dict[str, Any]) -> None:
        self.defaults = dict(defaults)

    def __call__(
        self, fn: Callable[..., Any], inputs: Any, *, expected: Any = None, **options: Any
    ) -> Report:
        __tracebackhide__ = True  # a failing test shows the report, not the plugin's source
        from gradcheck.assertions import assert_gradients

        return assert_gradients(fn, inputs, expected=expected, **{**self.defaults, **options})


@pytest.fixture
def gradcheck(request: pytest.FixtureRequest) -> GradientChecker:
    """Checks gradients in one call; options come from the closest `gradcheck` marker.

    Example::

        @pytest.mark.gradcheck(atol=1e-4)
        def test_square(gradcheck):
            x = torch.tensor([1.0, 2.0], requires_grad=True)
            gradcheck(lambda x: (x**2).sum(), x, expected=lambda x: 2 * x)
    """
    defaults: dict[str, Any] = {}
    # Closest marker last, so a test's own marker overrides its module's.
    for marker in reversed(list(request.node.iter_markers("gradcheck"))):
        if marker.args:
            raise pytest.UsageError(
                f"@pytest.mark.gradcheck takes keyword options only (eps=, atol=, rtol=, ...), "
                f"but {request.node.nodeid} passes positional {marker.args!r}"
            )
        defaults.update(marker.kwargs)
    return GradientChecker(defaults)
