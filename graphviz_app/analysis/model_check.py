"""A whole model's backward checked module by module, as plain frozen records: verdicts, report text, JSON."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

from ..model.checks import Status, UnitKind, Verdict

__all__ = ["SCHEMA_VERSION", "Status", "UnitKind", "Verdict", "ModelCheck"]

SCHEMA_VERSION = 1


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
        """No unit failed (units not checked, not checkable or detached do not count)."""
        return not any(v.status == Status.FAILED for v in self.verdicts)

    @property
    def detached(self) -> tuple[Verdict, ...]:
        """Where a gradient has no path (a `.detach()`, the autograd graph cut): no wrong backward, said apart."""
        return tuple(v for v in self.verdicts if v.status == Status.DETACHED and v.explained_by is None)

    @property
    def culprits(self) -> tuple[Verdict, ...]:
        """The failed units with nothing failing inside them: where the wrong backward is."""
        return tuple(v for v in self.verdicts if v.culprit)

    def counts(self) -> dict[str, int]:
        """How many verdicts have each status."""
        found = {s: 0 for s in Status.ALL}
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
        if self.detached:
            return self.detached[0].headline()
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
        named = self.culprits + self.detached
        for v in named[1:]:
            lines.append(f"also: {v.headline()}")
        for v in named:
            if v.element is not None:
                lines.append(f"  {v.label}: at {v.element}")
            lines += [f"  {v.label}: {n}" for n in v.notes]
        c = self.counts()
        lines.append(
            f"{len(self.verdicts)} unit(s): {c[Status.PASSED]} passed, {c[Status.FAILED]} failed, "
            + (f"{c[Status.DETACHED]} detached, " if c[Status.DETACHED] else "")
            + f"{c[Status.NOT_CHECKABLE]} not checkable, {c[Status.NOT_CHECKED]} not checked; "
            f"{self.evaluations} evaluations in {self.seconds:.1f} s ({self.strategy}, {self.probes} probes, "
            f"modes {'+'.join(self.modes)}{', order 2' if self.order == 2 else ''}, kinks {self.kinks})"
        )
        for v in self.verdicts:
            if any(v is n for n in named):
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


def _plain(value: Any) -> Any:
    if hasattr(value, "__dataclass_fields__"):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value
