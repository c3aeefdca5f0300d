"""What the page's jobs send back from the worker: plain, picklable data, no tensors."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "TensorValue", "Analysis", "GradientCheck", "CheckModes", "Failure", "Tolerances", "TRANSIENT_KINDS",
    "CHECKED_GRADIENT", "CHECKED_SUM", "CHECKED_JACOBIAN",
]

Tolerances = tuple[float, float, float]  # a gradient check's eps, atol, rtol

# What a hand gradient was checked as: the gradient of a scalar output; for a non-scalar
# output, the gradient of its sum (what the page's .grad table shows) or its full Jacobian.
CHECKED_GRADIENT, CHECKED_SUM, CHECKED_JACOBIAN = "gradient", "gradient of the sum", "Jacobian"

# Failures that may pass on a second try (a busy machine, a killed worker, a
# time-out beside other programs): the page offers Run again for these. A
# time-out with the machine to itself (`overtime`) would stop at the same point.
TRANSIENT_KINDS = frozenset({"time", "crash", "busy", "cancelled"})


@dataclass(frozen=True, slots=True)
class TensorValue:
    """One tensor as the page shows it: `text` is its values, or why there are none."""

    name: str
    shape: str
    dtype: str
    device: str
    text: str


@dataclass(frozen=True, slots=True)
class Analysis:
    """One program evaluated, traced and differentiated, or a saved graph opened.

    `viewer` is the graph as the interactive viewer's data (`graphviz_app.viewer.payload`,
    encoded: base64 of gzipped JSON), sent to the browser once; `graph_json` the graph
    (schema 2), from which the SVG, PNG and DOT downloads are made when asked for;
    `outputs` the value of the program's last line; `grads` each named leaf's and each
    module parameter's `.grad` after backward (in definition order); `leaves` the names a
    gradient can be checked against. `gradient_origin` says where NaN/Inf first appears
    in backward; `modules` the module summary rows (module, type, ops, activations,
    params, param bytes) as text, empty for a graph without nn modules. `source` is
    empty for a program's graph, the file's name for a saved graph opened on the page.
    """

    summary: str
    viewer: str
    graph_json: str
    node_count: int
    outputs: tuple[TensorValue, ...]
    grads: tuple[TensorValue, ...]
    leaves: tuple[str, ...]
    notes: tuple[str, ...]
    seconds: float
    gradient_origin: str | None = None  # where NaN/Inf first appears in backward, and its line
    modules: tuple[tuple[str, str, str, str, str, str], ...] = ()
    source: str = ""


@dataclass(frozen=True, slots=True)
class GradientCheck:
    """A hand-derived gradient checked against autograd and finite differences.

    `report` is the checker's `Report.to_dict()`; `text` its `str()`.
    """

    wrt: str
    expected: str
    passed: bool
    text: str
    report: dict[str, Any]
    seconds: float
    checked: str = CHECKED_GRADIENT  # CHECKED_GRADIENT, CHECKED_SUM or CHECKED_JACOBIAN
    warnings: tuple[str, ...] = ()  # what the checker warned about (kinks="warn")


@dataclass(frozen=True, slots=True)
class CheckModes:
    """What the check panel asks for beyond reverse mode: forward mode, second order, kinks."""

    forward: bool = False
    order: int = 1
    kinks: str = "fail"  # "fail", "warn" or "pass"


@dataclass(frozen=True, slots=True)
class Failure:
    """Why a job gave no result, in words a person can act on.

    `kind` is the expression language's error kind (syntax, refused, name,
    limit, torch, device, shape, dtype, memory, time, crash, input) or
    `trace`, `render`, `check`, `internal`, or the page's scheduling kinds
    `busy`, `cancelled` and `overtime` (a time-out with the machine to itself);
    `line`/`col` point into the program when known.
    """

    message: str
    kind: str = "refused"
    line: int | None = None
    col: int | None = None
    excerpt: str | None = None

    @property
    def transient(self) -> bool:
        """Whether trying again could succeed (a timeout, a crashed worker)."""
        return self.kind in TRANSIENT_KINDS

    def __str__(self) -> str:
        if self.line is None:
            return self.message
        where = f"line {self.line}" + (f", col {self.col}" if self.col is not None else "")
        return f"{where}: {self.message}"
