"""The result of a gradient check as plain frozen data: no torch needed to read it."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

__all__ = [
    "SCHEMA_VERSION",
    "Blame",
    "Element",
    "Comparison",
    "PairReport",
    "TensorSummary",
    "Timings",
    "MemoryInfo",
    "Report",
    "to_plain",
]

SCHEMA_VERSION = 1


class Blame:
    """Which side of a failing (output, input) pair is most likely wrong.

    Plain string constants, so `to_dict()` carries them as they are.
    """

    NONE = "none"  # the pair passed
    EXPECTED = "expected"  # the hand derivation disagrees with autograd and finite differences
    AUTOGRAD = "autograd"  # the backward disagrees with finite differences (and expected)
    NUMERICAL = "numerical"  # finite differences disagree: a kink, or too little precision
    UNCLEAR = "unclear"  # all three sides disagree with each other
    NONFINITE = "nonfinite"  # a side gives NaN or Inf: nothing can be compared there


@dataclass(frozen=True, slots=True)
class Element:
    """One Jacobian element: the values each side gives and how far apart they are.

    `index` indexes the Jacobian, whose shape is output shape + input shape, so
    its first part is the output element and its last part the input element.
    """

    index: tuple[int, ...]
    autograd: float
    numerical: float
    expected: float | None
    abs_error: float
    rel_error: float
    failed: bool


@dataclass(frozen=True, slots=True)
class Comparison:
    """One side checked against another over a whole (output, input) pair.

    `name` is `autograd~numerical`, `expected~autograd` or `expected~numerical`;
    the right-hand side is the reference that `rtol` scales with.
    """

    name: str
    passed: bool
    max_abs_error: float
    max_rel_error: float
    failed_count: int


@dataclass(frozen=True, slots=True)
class PairReport:
    """The check of one Jacobian block d output[output_index] / d input[input_index].

    When the block has at most `detail_limit` elements, `autograd`, `numerical`,
    `expected` (or None), `error` and `failed_mask` hold every element, flat in
    row-major order of `shape`; otherwise they are None and `worst_elements` is
    all there is. `failed` lists flat indices of failing elements (at most
    `detail_limit` of them; `failed_count` is the true count). `error` is, per
    element, the largest absolute difference between any two sides.
    `nonfinite` counts NaN/Inf elements per side ("autograd", "numerical",
    "expected"); any makes the pair fail with blame `Blame.NONFINITE`.
    """

    output_index: int
    input_index: int
    output_shape: tuple[int, ...]
    input_shape: tuple[int, ...]
    shape: tuple[int, ...]
    numel: int
    passed: bool
    blame: str
    max_abs_error: float
    max_rel_error: float
    failed_count: int
    worst: Element
    worst_elements: tuple[Element, ...]
    comparisons: tuple[Comparison, ...]
    failed: tuple[int, ...]
    kink_count: int
    autograd: tuple[float, ...] | None
    numerical: tuple[float, ...] | None
    expected: tuple[float, ...] | None
    error: tuple[float, ...] | None
    failed_mask: tuple[bool, ...] | None
    constant_ratio: float | None = None
    nonfinite: tuple[tuple[str, int], ...] = ()

    def __repr__(self) -> str:
        verdict = "passed" if self.passed else f"FAILED at {self.failed_count} element(s), blame {self.blame}"
        return (
            f"<PairReport output {self.output_index}, input {self.input_index}: {verdict}, "
            f"{self.numel} elements, max abs error {self.max_abs_error:.2g}; .worst_elements, "
            ".autograd, .numerical for the values>"
        )


@dataclass(frozen=True, slots=True)
class TensorSummary:
    """What the report remembers of one input or output tensor."""

    index: int
    shape: tuple[int, ...]
    dtype: str
    device: str
    differentiated: bool


@dataclass(frozen=True, slots=True)
class Timings:
    """Wall-clock seconds spent on each part of the check."""

    autograd_s: float
    numerical_s: float
    expected_s: float
    compare_s: float
    total_s: float


@dataclass(frozen=True, slots=True)
class MemoryInfo:
    """How the finite differences were chunked, and what happened with memory.

    `chunk_size` is the number of input elements perturbed per batched call (each
    costs two function evaluations); `chunk_bytes` our estimate of one chunk's
    working memory; `out_of_memory` says what was asked for when even the
    smallest chunk did not fit (then the check did not run to the end).
    """

    budget_bytes: int
    chunk_size: int
    chunk_bytes: int
    oom_retries: int
    out_of_memory: str | None


@dataclass(frozen=True, slots=True)
class Report:
    """Everything a gradient check found, as plain data.

    `str(report)` is the readable table; `to_dict()` a JSON-ready dict whose
    keys are documented in the README (schema version `SCHEMA_VERSION`).
    """

    passed: bool
    mode: str
    pairs: tuple[PairReport, ...]
    inputs: tuple[TensorSummary, ...]
    outputs: tuple[TensorSummary, ...]
    device: str
    autograd_dtype: str
    numerical_dtype: str
    expected_dtype: str | None
    numerical_method: str
    autograd_method: str
    eps: float
    atol: float
    rtol: float
    precision_floor: float
    timings: Timings
    memory: MemoryInfo
    notes: tuple[str, ...]

    @property
    def failed_pairs(self) -> tuple[PairReport, ...]:
        """The (output, input) pairs that did not pass."""
        return tuple(p for p in self.pairs if not p.passed)

    @property
    def has_expected(self) -> bool:
        """Whether a hand-derived gradient took part in the check."""
        return self.expected_dtype is not None

    def pair(self, output_index: int, input_index: int) -> PairReport:
        """The report of one (output, input) pair.

        Raises:
            KeyError: when no such pair was checked.
        """
        for p in self.pairs:
            if (p.output_index, p.input_index) == (output_index, input_index):
                return p
        checked = [(p.output_index, p.input_index) for p in self.pairs]
        raise KeyError(
            f"no pair (output {output_index}, input {input_index}) in this report; "
            f"the checked pairs are {checked}"
        )

    def to_dict(self) -> dict[str, Any]:
        """This report as JSON-ready data: `json.dumps(d, allow_nan=False)` works.

        Tuples become lists, and non-finite floats the strings "nan", "inf", "-inf".
        """
        data: dict[str, Any] = to_plain(self)
        data["schema_version"] = SCHEMA_VERSION
        return data

    def __str__(self) -> str:
        from gradcheck._format import format_report

        return format_report(self)

    def __repr__(self) -> str:
        # A notebook shows this for a report left as a cell's last value: keep it
        # one line that says what it is and how to see the rest.
        if self.memory.out_of_memory:
            verdict = "did not finish (out of memory)"
        elif self.passed:
            verdict = "passed"
        else:
            verdict = f"FAILED ({len(self.failed_pairs)} of {len(self.pairs)} pairs disagree)"
        worst = max((p.max_abs_error for p in self.pairs), default=0.0)
        return (
            f"<gradcheck Report: {verdict}, {len(self.pairs)} (output, input) pair(s), "
            f"max abs error {worst:.2g}, on {self.device}; print(report) for the table, "
            "report.pairs for the numbers, report.to_dict() for JSON>"
        )


def to_plain(value: Any) -> Any:
    """Dataclasses, tuples and floats as JSON-ready values, recursively (see `Report.to_dict`)."""
    if hasattr(value, "__dataclass_fields__"):
        return {f.name: to_plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, (tuple, list)):
        return [to_plain(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value
