"""The result of a gradient check as plain frozen data: no torch needed to read it."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

__all__ = [
    "SCHEMA_VERSION",
    "Blame",
    "Check",
    "Element",
    "Comparison",
    "PairReport",
    "TensorSummary",
    "Timings",
    "MemoryInfo",
    "Report",
    "to_plain",
    "set_text_formatter",
]

SCHEMA_VERSION = 2


class Blame:
    """Which side of a failing (output, input) pair is most likely wrong.

    Plain string constants, so `to_dict()` carries them as they are.
    """

    NONE = "none"  # the pair passed
    EXPECTED = "expected"  # the hand derivation disagrees with autograd and finite differences
    AUTOGRAD = "autograd"  # the backward disagrees with finite differences (and expected)
    NUMERICAL = "numerical"  # finite differences disagree: a kink, or too little precision
    SHARED = "shared"  # autograd and expected agree, finite differences are sound: one shared mistake
    ROUNDING = "rounding"  # low-precision autograd off by rounding; in float64 it agrees (inconclusive)
    UNCLEAR = "unclear"  # all three sides disagree with each other
    NONFINITE = "nonfinite"  # a side gives NaN or Inf: nothing can be compared there
    DETACHED = "detached"  # fn computes part of its result under no_grad: differences see it, autograd not
    REVERSE = "reverse"  # in to_dict(): a forward-mode pair's third side, reverse mode, is likely wrong


class Check:
    """What a pair checks: plain string constants, as `PairReport.check` carries them."""

    REV = "rev"  # reverse mode (backward, vector-Jacobian products) against finite differences
    FWD = "fwd"  # forward mode (jvp) against finite differences and reverse mode
    REV2 = "rev2"  # second order: the Jacobian of the gradient (double backward) against differences of it
    REV2_U = "rev2-u"  # second order: the gradient differentiated by an output's weights (grad_outputs)
    HVP = "hvp"  # second order: Hessian-vector products against differences of the gradient


@dataclass(frozen=True, slots=True)
class Element:
    """One Jacobian element: the values each side gives and how far apart they are.

    `index` indexes the Jacobian, whose shape is output shape + input shape:
    `output_element` is its first part (the output element), `input_element` the
    rest (the input element).
    """

    index: tuple[int, ...]
    autograd: float
    numerical: float
    expected: float | None
    abs_error: float
    rel_error: float
    failed: bool
    output_element: tuple[int, ...] = ()
    input_element: tuple[int, ...] = ()


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

    `check` says what the pair checks (`Check`); `sides` names its three value
    columns (for `Check.REV`: autograd, numerical, expected; for `Check.FWD`:
    forward, numerical, reverse). `kinks_accepted` counts elements that failed only
    at a verified kink and passed under `kinks="warn"` or `"pass"`. `atol`/`rtol`
    are the tolerances of comparisons with the side under test (wider than the
    check's for bfloat16/float16 autograd).

    In a screened report (`Report.mode == "screened"`) no single element was
    compared: `max_abs_error` is the largest gap between two sides' probes
    v^T J u, `max_rel_error` that gap over the reference side's largest probe,
    and `worst` the probe (index ()) where it lies.
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
    check: str = Check.REV
    sides: tuple[str, str, str] = ("autograd", "numerical", "expected")
    kinks_accepted: int = 0
    atol: float = 0.0
    rtol: float = 0.0

    def __repr__(self) -> str:
        verdict = "passed" if self.passed else f"FAILED at {self.failed_count} element(s), blame {self.blame}"
        return (
            f"<PairReport {self.check} output {self.output_index}, input {self.input_index}: {verdict}, "
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
    forward_s: float = 0.0
    second_order_s: float = 0.0


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
    modes: tuple[str, ...] = ("rev",)
    order: int = 1
    kinks: str = "fail"
    forward_method: str | None = None
    hvp_method: str | None = None

    @property
    def inconclusive(self) -> bool:
        """Whether every failing pair only differs by low-precision rounding (blame `rounding`)."""
        failing = self.failed_pairs
        return bool(failing) and all(p.blame == Blame.ROUNDING for p in failing)

    @property
    def kinks_accepted(self) -> int:
        """Elements that passed only because `kinks` accepted a verified kink there."""
        return sum(p.kinks_accepted for p in self.pairs)

    @property
    def failed_pairs(self) -> tuple[PairReport, ...]:
        """The (output, input) pairs that did not pass."""
        return tuple(p for p in self.pairs if not p.passed)

    @property
    def has_expected(self) -> bool:
        """Whether a hand-derived gradient took part in the check."""
        return self.expected_dtype is not None

    def pair(self, output_index: int, input_index: int, check: str | None = None) -> PairReport:
        """The report of one (output, input) pair: the first checked, or that of `check`.

        For the second-order checks ("rev2", "hvp") `output_index` is the input
        whose gradient is differentiated and `input_index` the input it is
        differentiated by.

        Raises:
            KeyError: when no such pair was checked.
        """
        for p in self.pairs:
            if (p.output_index, p.input_index) == (output_index, input_index) and check in (None, p.check):
                return p
        checked = sorted({(p.output_index, p.input_index) for p in self.pairs if check in (None, p.check)})
        what = f"{check} pair" if check else "pair"
        raise KeyError(
            f"no {what} (output {output_index}, input {input_index}) in this report; "
            f"the checked pairs are {checked}"
        )

    def to_dict(self) -> dict[str, Any]:
        """This report as JSON-ready data: `json.dumps(d, allow_nan=False)` works.

        Tuples become lists, and non-finite floats the strings "nan", "inf", "-inf". A forward-mode
        pair whose third side is reverse mode, and which blames that side, says "reverse" (`Blame.REVERSE`),
        as its text does ("reverse mode likely wrong"), not "expected": no hand derivation took part.
        """
        data: dict[str, Any] = to_plain(self)
        for pair in data["pairs"]:
            if pair["blame"] == Blame.EXPECTED and pair["sides"][2] == "reverse":
                pair["blame"] = Blame.REVERSE
        data["schema_version"] = SCHEMA_VERSION
        return data

    def __str__(self) -> str:
        return _TEXT[0](self)

    def __repr__(self) -> str:
        # A notebook shows this for a report left as a cell's last value: keep it
        # one line that says what it is and how to see the rest.
        if self.memory.out_of_memory:
            verdict = "did not finish (out of memory)"
        elif self.inconclusive:
            verdict = "INCONCLUSIVE (low-precision rounding)"
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


def _plain_text(report: Report) -> str:
    return repr(report)


# The readable text comes from `_format`, which imports these records and registers
# itself (the package imports it first), so this module imports nothing of the checker.
_TEXT: list[Callable[[Report], str]] = [_plain_text]


def set_text_formatter(formatter: Callable[[Report], str]) -> None:
    """Makes `formatter` what `str(report)` calls."""
    _TEXT[0] = formatter


def to_plain(value: Any) -> Any:
    """Dataclasses, tuples and floats as JSON-ready values, recursively (see `Report.to_dict`)."""
    if hasattr(value, "__dataclass_fields__"):
        return {f.name: to_plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, (tuple, list)):
        return [to_plain(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value
