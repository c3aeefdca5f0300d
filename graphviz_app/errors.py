"""The exceptions graphviz_app raises, in one place."""

from __future__ import annotations

__all__ = [
    "GraphvizAppError",
    "TraceError",
    "NoGradFnError",
    "GradientError",
    "RenderError",
    "DotNotFoundError",
    "UnsupportedFormatError",
    "SchemaError",
    "CollapseError",
    "GraphDiffError",
    "DistributedError",
    "ChunkedLossError",
    "ModelCheckError",
]


class GraphvizAppError(Exception):
    """Base class of every error this package raises on purpose."""


class TraceError(GraphvizAppError, ValueError):
    """The outputs given to `trace` cannot be traced."""


class NoGradFnError(TraceError):
    """An output tensor has no autograd graph behind it."""


class GradientError(TraceError):
    """Backward cannot be replayed over a traced graph to measure its gradients."""


class RenderError(GraphvizAppError, RuntimeError):
    """Drawing or saving a graph failed."""


class DotNotFoundError(RenderError):
    """Graphviz's `dot` program is not installed or not on PATH."""


class UnsupportedFormatError(RenderError, ValueError):
    """The output file's suffix names no format we can write."""


class SchemaError(GraphvizAppError, ValueError):
    """A JSON document is not a graph of a schema version we can read."""


class CollapseError(GraphvizAppError, ValueError):
    """The options of a module view (`depth`, `expanded`) are not ones it can draw."""


class GraphDiffError(GraphvizAppError, AssertionError):
    """`assert_same_graph` found a difference; `.diff` holds it (a `graphviz_app.analysis.diff.GraphDiff`)."""

    def __init__(self, message: str, diff: object = None) -> None:
        super().__init__(message)
        self.diff = diff


class DistributedError(TraceError):
    """A distributed step cannot be run, forecast or gathered: what the job needs is missing or wrong."""


class ChunkedLossError(TraceError):
    """A loss cannot be computed in chunks over the tokens: `chunked_cross_entropy`'s arguments, or a step whose
    head's logits are used by more than reshapes and `F.cross_entropy` (the message names the use)."""


class ModelCheckError(GraphvizAppError, ValueError):
    """`check_model` cannot check this model: not a module, an option out of range, or its forward raised."""
