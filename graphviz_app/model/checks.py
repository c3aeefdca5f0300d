"""A model check's verdict per unit (module call, custom Function, hook, `.detach()`), as a graph carries it."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from ..errors import SchemaError
from .schema import json_number, number_from_json

__all__ = ["Status", "UnitKind", "Verdict", "verdict_to_dict", "verdict_from_dict"]


class Status:
    """What a unit's check found: plain string constants, as `Verdict.status` carries them."""

    PASSED = "passed"
    FAILED = "failed"
    DETACHED = "detached"  # the gradient has no path there (a .detach(), no_grad): no wrong backward
    NOT_CHECKABLE = "not checkable"  # `Verdict.reason` says why; the check went on
    NOT_CHECKED = "not checked"  # skipped by a pattern, the budget, or a passing parent (bisect)
    ALL = (PASSED, FAILED, DETACHED, NOT_CHECKABLE, NOT_CHECKED)


class UnitKind:
    """What a verdict is about: plain string constants, as `Verdict.kind` carries them."""

    MODULE = "module"  # one call of an nn.Module's forward
    FUNCTION = "function"  # one call of a custom autograd.Function
    HOOK = "hook"  # a tensor hook a module's forward registered
    DETACH = "detach"  # a .detach() in a module's forward that cut a gradient
    DATA = "data"  # an in-place change through .data in a module's forward (a saved tensor changed)
    ALL = (MODULE, FUNCTION, HOOK, DETACH, DATA)


@dataclass(frozen=True, slots=True)
class Verdict:
    """The check of one unit's backward at the inputs it received in the step.

    `path` is the qualified module name ("" the model itself; for a Function, hook,
    `.detach()` or `.data` change, the module whose forward made it). `call` counts the
    calls of the same unit (0-based) and `calls` how many there were. `name` is what
    `source` points at (`"Block.forward"`, `"FusedAttention.backward"`, `"hook scale_grad"`).
    A failed verdict is the `culprit` when nothing inside it failed; otherwise
    `explained_by` names the culprit inside. `input` names the input or parameter
    whose gradient is wrong, `failed_check` what disagreed ("rev" the backward, "fwd" forward
    mode, "rev2" double backward), `ratio` is set when the backward is that constant
    multiple of finite differences, `abs_error`/`rel_error` are the largest gap
    between autograd's and finite differences' probes v^T J u (and its size against
    the largest probe), `element` where it lies. Status "detached" marks a gradient cut on
    purpose or by mistake (a `.detach()`, no path in the autograd graph): not a wrong backward.
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
        if self.status == Status.NOT_CHECKABLE or self.status == Status.NOT_CHECKED:
            return f"{self.status}: {self.reason}"
        if self.status == Status.DETACHED:
            return _detached(self)
        if self.explained_by is not None:
            return f"failed, explained by {self.explained_by} inside it"
        if self.kind == UnitKind.HOOK:
            return "this tensor hook changes the gradient"
        if self.kind == UnitKind.DETACH:
            return "this .detach() cuts a gradient that finite differences see"
        if self.kind == UnitKind.DATA:
            return ("this in-place change through .data alters a tensor autograd saved for backward "
                    "(autograd cannot see it; use an out-of-place op, or change a clone)")
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

    def short(self) -> str:
        """A few words for a table cell: "passed", "culprit: 1.02 x", "detached", "fails inside"."""
        if self.status == Status.FAILED:
            if self.explained_by is not None:
                return f"fails inside ({self.explained_by})"
            what = "culprit" if self.kind == UnitKind.MODULE else f"culprit {self.name}"
            if self.kind in (UnitKind.HOOK, UnitKind.DATA):
                return f"{what}, {self.source}" if self.source else what
            size = f"{self.ratio:.3g} x" if self.ratio is not None else f"error {_num(self.abs_error)}"
            return f"{what}: {size}" + (f" ({self.input})" if self.input else "")
        if self.status == Status.DETACHED:
            return "detached (no gradient path)"
        return self.status


_SIDES = {"rev": "backward", "fwd": "forward mode (jvp)", "rev2": "double backward"}


def _detached(v: Verdict) -> str:
    if v.explained_by is not None:
        return f"detached (no gradient path) at {v.explained_by} inside it; no wrong backward"
    target = f" of the {v.input}" if v.input else ""
    how = "the autograd graph" if v.kind != UnitKind.DETACH else (
        "this .detach()" if v.name == ".detach()" else f"this {v.name} block")
    return (f"detached (no gradient path): {how} cuts the gradient{target} that finite differences see; "
            "no wrong backward. If that is meant, pass skip=[...] for this module")


def _num(value: float | None) -> str:
    return "?" if value is None else f"{value:.2g}"


_FLOATS = ("ratio", "abs_error", "rel_error", "seconds")


def verdict_to_dict(v: Verdict) -> dict[str, Any]:
    """A JSON-ready dict (strict JSON: non-finite floats as "nan", "inf", "-inf"); `verdict_from_dict` reads it.

    >>> v = Verdict("fc", UnitKind.MODULE, "Linear", "Linear.forward", None, Status.FAILED, rel_error=float("inf"))
    >>> verdict_to_dict(v)["rel_error"], verdict_from_dict(verdict_to_dict(v)) == v
    ('inf', True)
    """
    data: dict[str, Any] = {}
    for f in fields(Verdict):
        value = getattr(v, f.name)
        if f.name in _FLOATS and isinstance(value, float):
            value = json_number(value)
        elif isinstance(value, tuple):
            value = list(value)
        data[f.name] = value
    return data


def verdict_from_dict(d: dict[str, Any]) -> Verdict:
    """Read a verdict written by `verdict_to_dict` (types are checked by `model.validation`).

    Raises:
        SchemaError: a field is missing, unknown, or holds a number that is not one.
    """
    known = {f.name for f in fields(Verdict)}
    if not isinstance(d, dict):
        raise SchemaError(f"a check verdict must be an object, found {type(d).__name__}")
    unknown = sorted(set(d) - known)
    if unknown:
        raise SchemaError(f"a check verdict has unknown field(s) {', '.join(unknown)}; was it written by "
                          "Graph.to_json()?")
    values: dict[str, Any] = {}
    for key, value in d.items():
        if key in _FLOATS and value is not None and not isinstance(value, bool):
            try:
                value = number_from_json(value)
            except ValueError as e:
                raise SchemaError(f"a check verdict's {key}: {e}") from None
        elif key in ("checks", "notes") and isinstance(value, list):
            value = tuple(value)
        values[key] = value
    try:
        return Verdict(**values)
    except TypeError as e:
        raise SchemaError(f"a check verdict lacks a field it needs: {e}") from None
