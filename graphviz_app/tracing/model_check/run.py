"""`check_model`: each module call, custom Function call and tensor hook of a step against finite differences."""

from __future__ import annotations

import fnmatch
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import torch

from ...analysis.model_check import ModelCheck, Status, UnitKind, Verdict
from ...errors import ModelCheckError
from .capture import Call, Site, Step, capture, cuda_devices
from .narrowing import narrow
from .probed import FLOAT32
from .probes import Float64Failed, NotCheckable, Options, Outcome, screen
from .units import Budget, BudgetSpent, Unit, suppressed

__all__ = ["check_model", "STRATEGIES", "KINKS"]

STRATEGIES = ("all", "bisect")
KINKS = ("pass", "warn", "fail")

Progress = Callable[[int, int, str], None]


def check_model(
    model: torch.nn.Module,
    *args: Any,
    strategy: str = "all",
    include: Sequence[str] = (),
    skip: Sequence[str] = (),
    max_evaluations: int | None = None,
    seconds: float | None = None,
    probes: int = 12,
    eps: float = 1e-6,
    atol: float = 1e-7,
    rtol: float = 1e-5,
    kinks: str = "pass",
    modes: Sequence[str] = ("rev",),
    order: int = 1,
    seed: int = 0,
    progress: Progress | None = None,
    **kwargs: Any,
) -> ModelCheck:
    """Checks the backward of every module call in `model(*args, **kwargs)` against finite differences.

    The forward runs once, keeping what each module call, custom `autograd.Function` call
    and tensor hook received. Each call is then re-run alone in float64 copies at exactly
    those inputs (the same random state, so dropout draws the same masks; fresh copies of
    its buffers, so BatchNorm's running statistics are what that call saw) and screened
    with `probes` random ±1 directions: v^T J u by autograd against central differences
    along u, every differentiated input and parameter moved at once. A failing unit with
    nothing failing inside it is the culprit: narrowed to the input or parameter and the
    element whose gradient is wrong, and to the tensor hook or `.detach()` in its own code
    when switching that off makes it pass. The model, its buffers and torch's random state
    are left as they were.

    Args:
        model: the `nn.Module` to check (train or eval mode, as it is).
        args: positional inputs of the forward.
        strategy: "all" checks every unit, children before parents, largest first;
            "bisect" checks the model, then only the children of what did not pass.
        include: fnmatch patterns of module paths to check (`"blocks.*"`); empty: all.
        skip: fnmatch patterns of module paths not to check.
        max_evaluations: stop after this many forward evaluations (None: no limit).
        seconds: stop after this many seconds (None: no limit).
        probes: k, the number of random directions on each side (misses with
            probability about 2^(1-k) per wrong element).
        eps: the finite-difference step along each direction.
        atol: absolute tolerance of a probe v^T J u.
        rtol: tolerance relative to the unit's largest probe.
        kinks: "pass" (default) lets a probe that crossed a verified kink (ReLU,
            max-pool) pass with a note; "warn" also warns; "fail" fails it.
        modes: ("rev",) checks backward; ("rev", "fwd") also forward mode (jvp).
        order: 2 also checks double backward (Hessian probes u^T H u).
        seed: seeds the random directions.
        progress: called as `progress(done, total, label)` after each unit.
        kwargs: every other keyword goes to the forward.

    Returns:
        A `ModelCheck`: `str(result)`'s first line names the culprit; `.verdicts`
        holds a record per unit, `.to_dict()` the JSON.

    Raises:
        ModelCheckError: `model` is no `nn.Module`, an option is out of range, or the
            forward raised.

    >>> import torch
    >>> torch.manual_seed(0) and None
    >>> result = check_model(torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Tanh()), torch.randn(4, 3))
    >>> result.passed, [v.path for v in result.verdicts]
    (True, ['0', '1', ''])
    """
    opts = _options(model, strategy, probes, eps, atol, rtol, kinks, tuple(modes), order, seed, max_evaluations)
    started = time.monotonic()
    budget = Budget(max_evaluations, seconds)
    with torch.random.fork_rng(devices=cuda_devices()):  # the caller's random state is as it was, whatever ran
        step = _capture(model, args, kwargs)
        checker = _Checker(step.calls, opts, budget, include, skip, progress)
        checker.traverse(strategy)
        verdicts = checker.finish()
    notes = _model_notes(model)
    accepted = sum(1 for v in verdicts for n in v.notes if "crossed a kink" in n)
    if accepted and kinks == "warn":
        from gradcheck.errors import GradcheckWarning

        warnings.warn(f"{accepted} unit(s) passed only at verified kinks (kinks='warn')", GradcheckWarning,
                      stacklevel=2)
    return ModelCheck(
        verdicts=verdicts, model_type=type(model).__name__, strategy=strategy, modes=opts.modes, order=order,
        kinks=kinks, probes=probes, evaluations=budget.used, seconds=time.monotonic() - started,
        budget_spent=budget.spent, notes=tuple(notes))


def _capture(model: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Step:
    """The step's calls; the model's buffers are restored after the forward that recorded them."""
    saved = {k: b.detach().clone() for k, b in model.named_buffers()}
    try:
        step, _ = capture(model, args, kwargs)
    except Exception as e:
        raise ModelCheckError(f"the model's forward raised {type(e).__name__}: {e}; "
                              "check_model runs model(*args, **kwargs) once: pass inputs it accepts") from e
    finally:
        with torch.no_grad():
            for k, b in model.named_buffers():
                if k in saved:
                    b.copy_(saved[k])
    if not step.calls:
        raise ModelCheckError("the forward made no module call to check")
    return step


def _options(model: Any, strategy: str, probes: int, eps: float, atol: float, rtol: float, kinks: str,
             modes: tuple[str, ...], order: int, seed: int, max_evaluations: int | None) -> Options:
    if not isinstance(model, torch.nn.Module):
        raise ModelCheckError(f"check_model() expects an nn.Module first, got a {type(model).__name__}; "
                              "call check_model(model, *inputs)")
    if strategy not in STRATEGIES:
        raise ModelCheckError(f"strategy must be one of {', '.join(STRATEGIES)}, got {strategy!r}")
    if kinks not in KINKS:
        raise ModelCheckError(f"kinks must be one of {', '.join(KINKS)}, got {kinks!r}")
    if "rev" not in modes or not set(modes) <= {"rev", "fwd"}:
        raise ModelCheckError(f"modes must be ('rev',) or ('rev', 'fwd'), got {modes!r}")
    if order not in (1, 2):
        raise ModelCheckError(f"order must be 1 or 2, got {order!r}")
    if not isinstance(probes, int) or probes < 2:
        raise ModelCheckError(f"probes must be an integer of at least 2, got {probes!r}")
    if eps <= 0 or atol < 0 or rtol < 0:
        raise ModelCheckError(f"eps must be > 0 and atol, rtol >= 0; got eps={eps}, atol={atol}, rtol={rtol}")
    if max_evaluations is not None and max_evaluations < 1:
        raise ModelCheckError(f"max_evaluations must be at least 1 (or None), got {max_evaluations}")
    return Options(probes=probes, eps=eps, atol=atol, rtol=rtol, kinks=kinks, seed=seed, modes=modes, order=order)


def _model_notes(model: torch.nn.Module) -> list[str]:
    kinds = {type(m).__name__ for m in model.modules()}
    notes = []
    if model.training and any("Dropout" in k for k in kinds):
        notes.append("dropout: every evaluation of a call restarts torch's generator where that call began, "
                     "so it draws the step's masks (in float64)")
    if any(k.startswith(("BatchNorm", "SyncBatchNorm", "InstanceNorm")) for k in kinds):
        notes.append("buffers (running statistics) are fresh copies of the call's own at every evaluation; "
                     "the model's are as they were before the check")
    return notes


class _Checker:
    """The traversal: which calls to check, in what order, and the outcome of each."""

    def __init__(self, calls: list[Call], opts: Options, budget: Budget, include: Sequence[str],
                 skip: Sequence[str], progress: Progress | None) -> None:
        self.calls, self.opts, self.budget, self.progress = calls, opts, budget, progress
        self.include, self.skip = tuple(include), tuple(skip)
        self.results: dict[int, Verdict] = {}
        self.outcomes: dict[int, Outcome] = {}
        self.order: list[int] = []
        self.dtypes: dict[int, torch.dtype] = {}  # calls checked in float32, not float64
        self.done = 0

    def traverse(self, strategy: str) -> None:
        calls = self.calls
        if strategy == "all":
            for c in sorted(calls, key=lambda c: (-c.depth, -c.size, c.index)):
                self.check(c)
            return
        todo = sorted((c for c in calls if c.parent is None), key=lambda c: (-c.size, c.index))
        while todo:
            c = todo.pop(0)
            self.check(c)
            below = sorted((calls[i] for i in c.children), key=lambda c: (-c.size, c.index))
            if self.results[c.index].status != Status.PASSED:  # failed, or could not say: look inside
                todo = below + todo
            else:
                for d in self._descendants(c):
                    self._set(d, Status.NOT_CHECKED, "the module around it passed (bisect)")

    def _descendants(self, c: Call) -> list[Call]:
        found, todo = [], list(c.children)
        while todo:
            d = self.calls[todo.pop()]
            found.append(d)
            todo.extend(d.children)
        return found

    def _set(self, c: Call, status: str, reason: str | None, **extra: Any) -> None:
        self.results[c.index] = _verdict(c, status, reason, **extra)
        self.order.append(c.index)
        self.done += 1
        if self.progress is not None:
            self.progress(self.done, len(self.calls), self.results[c.index].label)

    def _selected(self, c: Call) -> str | None:
        if self.include and not any(fnmatch.fnmatchcase(c.path, p) for p in self.include):
            return "not among the included modules"
        if any(fnmatch.fnmatchcase(c.path, p) for p in self.skip):
            return "skipped by a pattern"
        return None

    def check(self, c: Call) -> None:
        why = self._selected(c)
        if why is not None or self.budget.spent:
            self._set(c, Status.NOT_CHECKED, why or "the budget ran out")
            return
        started, used = time.monotonic(), self.budget.used
        cost: dict[str, Any] = {"notes": ()}
        try:
            try:
                out, cost["notes"] = self._screen(c, torch.float64)
            except Float64Failed as e:  # a float32-only kernel or Function: checked in float32, and said
                cost["notes"] = (f"checked in float32 with tolerances scaled to float32 rounding (step "
                                 f"{FLOAT32['step']:g}, rtol {FLOAT32['rtol']:g}): in float64 {e}",)
                out, notes = self._screen(c, torch.float32)
                self.dtypes[c.index] = torch.float32
                cost["notes"] += notes
        except BudgetSpent:
            self._set(c, Status.NOT_CHECKED, "the budget ran out")
            return
        except NotCheckable as e:
            self._set(c, Status.NOT_CHECKABLE, str(e), **cost, **_spent(started, used, self.budget))
            return
        except Exception as e:  # a unit that cannot be re-run alone says so, and the check goes on
            reason = f"re-running it alone raised {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            self._set(c, Status.NOT_CHECKABLE, reason, **cost, **_spent(started, used, self.budget))
            return
        status = Status.PASSED if out.passed else Status.FAILED
        if not out.passed:
            self.outcomes[c.index] = out
        self._set(c, status, out.reason, abs_error=out.abs_error, rel_error=out.rel_error,
                  ratio=out.ratio, checks=tuple(out.checks), failed_check=None if out.passed else out.check,
                  notes=cost["notes"] + tuple(out.notes), **_spent(started, used, self.budget))

    def _screen(self, c: Call, dtype: torch.dtype) -> tuple[Outcome, tuple[str, ...]]:
        unit = Unit(c, self.budget, dtype)
        if dtype == torch.float64 and _unconvertible(unit):
            raise Float64Failed("its tensors cannot be held in float64 on their device")
        return screen(unit, self.opts), tuple(unit.notes)

    def finish(self) -> tuple[Verdict, ...]:
        """Culprits narrowed and explained, verdicts children before parents with parent indices."""
        failed = {i for i, v in self.results.items() if v.status == Status.FAILED}
        extra: list[Verdict] = []
        culprit_of: dict[int, str] = {}
        cut: dict[int, bool] = {}  # failed only because a gradient has no path (a .detach(), the graph cut)
        for i in sorted(failed, key=lambda i: -self.calls[i].depth):
            below = [d for d in self._descendants(self.calls[i]) if d.index in failed]
            if below:
                culprit_of[i] = culprit_of.get(below[0].index) or _named(self.results[below[0].index])
                cut[i] = all(cut[d.index] for d in below)
                self.results[i] = replace(self.results[i], explained_by=culprit_of[i],
                                          status=Status.DETACHED if cut[i] else Status.FAILED)
                continue
            verdict, site, no_path = self._explain(self.calls[i], self.results[i])
            cut[i] = no_path or (site is not None and site.kind == UnitKind.DETACH)
            status = Status.DETACHED if cut[i] else Status.FAILED
            if site is not None:
                extra.append(replace(site, status=status, culprit=not cut[i]))
                culprit_of[i] = _named(site)
                verdict = replace(verdict, explained_by=culprit_of[i], status=status)
            else:
                verdict = replace(verdict, culprit=not cut[i], status=status)
            self.results[i] = verdict
        order = sorted(self.order, key=lambda i: (-self.calls[i].depth, -self.calls[i].size, i))
        position = {i: k for k, i in enumerate(order)}
        verdicts = [replace(self.results[i], parent=position.get(self.calls[i].parent or -1)
                            if self.calls[i].parent is not None else None) for i in order]
        return tuple(extra + verdicts)

    def _explain(self, c: Call, verdict: Verdict) -> tuple[Verdict, Verdict | None, bool]:
        """The culprit's failing input and element, the hook or .detach() behind it if there is one, and
        whether the autograd graph has no path from that input (a gradient cut, not a wrong one)."""
        out = self.outcomes.get(c.index)
        if out is None or out.reason is not None:
            return verdict, None, False
        try:
            found = narrow(Unit(c, self.budget, self.dtypes.get(c.index, torch.float64)), self.opts, out)
        except (BudgetSpent, NotCheckable):
            found = None
        if found is not None:
            verdict = replace(verdict, input=found.input, abs_error=found.abs_error, rel_error=found.rel_error,
                              ratio=found.ratio, element=found.element)
        for site in c.sites:
            if _fixed_without(c, site, self.opts, self.budget, self.dtypes.get(c.index, torch.float64)):
                return verdict, replace(verdict, kind=site.kind, name=site.name, source=site.source,
                                        culprit=True, checks=(), notes=()), False
        return verdict, None, found is not None and found.no_path and out.check == "rev"


def _unconvertible(unit: Unit) -> bool:
    """Whether a float64 copy came out in another dtype (a device without float64 keeps its own)."""
    values = unit.flat + list(unit.params.values())
    return any(t.is_floating_point() and t.dtype != torch.float64 for t in values)


def _fixed_without(c: Call, site: Site, opts: Options, budget: Budget, dtype: torch.dtype) -> bool:
    """Whether the call passes with the hook, .detach(), no_grad block or .data change at `site` switched off."""
    try:
        with suppressed(site):
            return screen(Unit(c, budget, dtype), opts).passed
    except (BudgetSpent, NotCheckable):
        return False


def _named(v: Verdict) -> str:
    return v.label if v.kind == UnitKind.MODULE else f"{v.label} ({v.name})"


def _spent(started: float, used: int, budget: Budget) -> dict[str, Any]:
    return {"evaluations": budget.used - used, "seconds": time.monotonic() - started}


def _verdict(c: Call, status: str, reason: str | None, **extra: Any) -> Verdict:
    return Verdict(path=c.path, kind=c.kind, type_name=c.type_name, name=c.name, source=c.source, status=status,
                   call=c.call, calls=c.calls, depth=c.depth, reason=reason, **extra)
