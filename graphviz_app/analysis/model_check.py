"""A whole model's backward checked module by module, as plain frozen records: verdicts, report text, JSON."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

__all__ = ["SCHEMA_VERSION", "Status", "UnitKind", "Verdict", "ModelCheck"]

SCHEMA_VERSION = 1


class Status:
    """What a unit's check found: plain string constants, as `Verdict.status` carries them."""

    PASSED = "passed"
    FAILED = "failed"
    NOT_CHECKABLE = "not checkable"  # `Verdict.reason` says why; the check went on
    NOT_CHECKED = "not checked"  # skipped by a pattern, the budget, or a passing parent (bisect)


class UnitKind:
    """What a verdict is about: plain string constants, as `Verdict.kind` carries them."""

    MODULE = "module"  # one call of an nn.Module's forward
    FUNCTION = "function"  # one call of a custom autograd.Function
    HOOK = "hook"  # a tensor hook a module's forward registered
    DETACH = "detach"  # a .detach() in a module's forward that cut a gradient


@dataclass(frozen=True, slots=True)
class Verdict:
    """The check of one unit's backward at the inputs it received in the step.

    `path` is the qualified module name ("" the model itself; for a Function, hook or
    detach, the module whose forward made it). `call` counts the calls of the same
    unit (0-based) and `calls` how many there were. `name` is what `source` points at
    (`"Block.forward"`, `"FusedAttention.backward"`, `"hook scale_grad"`).
    A failed verdict is the `culprit` when nothing inside it failed; otherwise
    `explained_by` names the culprit inside. `input` names the input or parameter
    whose gradient is wrong, `failed_check` what disagreed ("rev" the backward, "fwd" forward
    mode, "rev2" double backward), `ratio` is set when the backward is that constant
    multiple of finite differences, `abs_error`/`rel_error` are the largest gap
    between autograd's and finite differences' probes v^T J u (and its size against
    the largest probe), `element` where it lies.
    """

    path: str
    kind: str
    type_name: str
    name: str
    source: str | None
    status: str
    call: int = 0
    calls: int = 1
    depth: int = 0
    parent: int | None = None
    culprit: bool = False
    explained_by: str | None = None
    input: str | None = None
    ratio: float | None = None
    abs_error: float | None = None
    rel_error: float | None = None
    element: str | None = None
    reason: str | None = None
    checks: tuple[str, ...] = ()
    failed_check: str | None = None
    notes: tuple[str, ...] = ()
    evaluations: int = 0
    seconds: float = 0.0

    @property
    def label(self) -> str:
        """`blocks.3.attn`, `(model)` for the model itself, with `call 2 of 3` when called several times."""
        where = self.path or "(model)"
        return where if self.calls <= 1 else f"{where} (call {self.call + 1} of {self.calls})"

    def headline(self) -> str:
        """One line: the unit, what its source is, and what was found."""
        place = self.name if self.source is None else f"{self.name}, {self.source}"
        return f"{self.label} ({place}): {self.finding()}"

    def finding(self) -> str:
        """What the check found, in words."""
        if self.status == Status.PASSED:
            return "passed"
        if self.status in (Status.NOT_CHECKABLE, Status.NOT_CHECKED):
            return f"{self.status}: {self.reason}"
        if self.explained_by is not None:
            return f"failed, explained by {self.explained_by} inside it"
        what = {
            UnitKind.HOOK: "this tensor hook changes the gradient",
            UnitKind.DETACH: "this .detach() cuts a gradient that finite differences see",
        }.get(self.kind)
        if what is not None:
            return what
        target = f" for the {self.input}" if self.input else ""
        side = _SIDES.get(self.failed_check or "rev", "backward")
        if self.reason is not None:
            return f"{side} failed{target}: {self.reason}"
        if self.ratio is not None:
            return f"{side} is {self.ratio:.3g} x finite differences{target}"
        return (
            f"{side} differs from finite differences by {_num(self.abs_error)} "
            f"(relative {_num(self.rel_error)}){target}"
        )


@dataclass(frozen=True, slots=True)
class ModelCheck:
    """Everything `check_model` found: a verdict per unit, children before parents.

    `str(check)` is the text report, whose first line names the culprit (or says
    that every checked unit passed); `to_dict()` the JSON-ready data.
    """

    verdicts: tuple[Verdict, ...]
    model_type: str
    strategy: str
    modes: tuple[str, ...]
    order: int
    kinks: str
    probes: int
    evaluations: int
    seconds: float
    budget_spent: bool
    notes: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        """No unit failed (units not checked or not checkable do not count)."""
        return not any(v.status == Status.FAILED for v in self.verdicts)

    @property
    def culprits(self) -> tuple[Verdict, ...]:
        """The failed units with nothing failing inside them: where the wrong backward is."""
        return tuple(v for v in self.verdicts if v.culprit)

    def counts(self) -> dict[str, int]:
        """How many verdicts have each status."""
        found = {s: 0 for s in (Status.PASSED, Status.FAILED, Status.NOT_CHECKABLE, Status.NOT_CHECKED)}
        for v in self.verdicts:
            found[v.status] += 1
        return found

    def for_path(self, path: str) -> tuple[Verdict, ...]:
        """Every verdict about the module `path` (each call, and the Functions and hooks it made)."""
        return tuple(v for v in self.verdicts if v.path == path)

    def first_line(self) -> str:
        """The culprit's headline, or the overall verdict when there is none."""
        culprits = self.culprits
        if culprits:
            return culprits[0].headline()
        c = self.counts()
        if not c[Status.PASSED] and not c[Status.FAILED]:
            return (f"nothing was checked: {c[Status.NOT_CHECKABLE]} unit(s) not checkable, "
                    f"{c[Status.NOT_CHECKED]} not checked")
        return (
            f"{self.model_type}: every checked backward agrees with finite differences "
            f"({c[Status.PASSED]} passed, {c[Status.NOT_CHECKABLE]} not checkable, {c[Status.NOT_CHECKED]} not checked)"
        )

    def text(self, *, all_units: bool = False) -> str:
        """The report: the first line names the culprit, then every culprit, the counts, the other findings.

        `all_units=True` lists passing units too.
        """
        lines = [self.first_line()]
        for v in self.culprits[1:]:
            lines.append(f"also: {v.headline()}")
        for v in self.culprits:
            if v.element is not None:
                lines.append(f"  {v.label}: at {v.element}")
            lines += [f"  {v.label}: {n}" for n in v.notes]
        c = self.counts()
        lines.append(
            f"{len(self.verdicts)} unit(s): {c[Status.PASSED]} passed, {c[Status.FAILED]} failed, "
            f"{c[Status.NOT_CHECKABLE]} not checkable, {c[Status.NOT_CHECKED]} not checked; "
            f"{self.evaluations} evaluations in {self.seconds:.1f} s ({self.strategy}, {self.probes} probes, "
            f"modes {'+'.join(self.modes)}{', order 2' if self.order == 2 else ''}, kinks {self.kinks})"
        )
        for v in self.verdicts:
            if v.culprit:
                continue
            if all_units or v.status in (Status.FAILED, Status.NOT_CHECKABLE):
                lines.append(f"  {v.headline()}")
        if self.budget_spent:
            lines.append("the budget ran out: units after it were not checked (raise max_evaluations or seconds)")
        lines += list(self.notes)
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        c = self.counts()
        verdict = "passed" if self.passed else f"FAILED: {self.first_line()}"
        return (
            f"<ModelCheck {verdict}; {c[Status.PASSED]} passed, {c[Status.FAILED]} failed of "
            f"{len(self.verdicts)} units; print() for the report, .verdicts for the records>"
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data (`json.dumps(d, allow_nan=False)` works); non-finite floats as strings."""
        data: dict[str, Any] = _plain(self)
        data["passed"] = self.passed
        data["first_line"] = self.first_line()
        data["schema_version"] = SCHEMA_VERSION
        return data


_SIDES = {"rev": "backward", "fwd": "forward mode (jvp)", "rev2": "double backward"}


def _num(value: float | None) -> str:
    return "?" if value is None else f"{value:.2g}"


def _plain(value: Any) -> Any:
    if hasattr(value, "__dataclass_fields__"):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value
