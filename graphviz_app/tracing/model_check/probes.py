"""The random-probe screen of one unit: v^T J u by autograd against central differences along u.

All differentiated inputs and parameters move together along each ±1 direction u_b, so a unit
with a million parameters costs 2k + 2 evaluations and k backward passes. As in `gradcheck`'s
screen, an element whose error exceeds the tolerance escapes all k x k probes with probability
about 2^(1-k). A probe that misses is probed again at twice the step (`gradcheck`'s kink test):
a verified kink whose autograd value lies between the one-sided slopes passes under
`kinks="pass"`. `narrow` then finds the input (or parameter) and the element that are wrong.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from gradcheck.probes import probe_steps

from .units import BudgetSpent, Unit

__all__ = ["NotCheckable", "Options", "Outcome", "screen", "narrow"]

_EPS64 = 2.220446049250313e-16


class NotCheckable(Exception):
    """The unit cannot be checked; the message says why."""


@dataclass(frozen=True, slots=True)
class Options:
    """The screen's knobs (see `check_model`)."""

    probes: int = 12
    eps: float = 1e-6
    atol: float = 1e-7
    rtol: float = 1e-5
    kinks: str = "pass"
    seed: int = 0
    modes: tuple[str, ...] = ("rev",)
    order: int = 1


@dataclass
class Outcome:
    """What the screen found; on failure, what `narrow` needs to go on."""

    passed: bool
    check: str = "rev"
    abs_error: float | None = None
    rel_error: float | None = None
    ratio: float | None = None
    reason: str | None = None
    notes: list[str] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)
    column: int = 0
    row: int = 0
    parts: torch.Tensor | None = None  # (inputs, k, k): each input's share of autograd's probes
    tol: float = 0.0


def _signs(gen: torch.Generator, k: int, n: int) -> torch.Tensor:
    return torch.randint(0, 2, (k, n), generator=gen, dtype=torch.float64) * 2 - 1


class _Probed:
    """The unit at its inputs, with the random directions and projections the screen shares."""

    def __init__(self, unit: Unit, opts: Options) -> None:
        self.unit, self.opts = unit, opts
        self.xs = [d.value for d in unit.inputs]
        self.h = opts.eps

    def run(self, xs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """Outputs at `xs`, computed as the base was (leaves that require grad: the same code paths)."""
        leaves = [x.detach().requires_grad_() for x in xs]
        return [y.detach() for y in self.unit(leaves)]

    def project(self, ys: Sequence[torch.Tensor]) -> torch.Tensor:
        """(k,) numbers v_a^T y over every output."""
        total = torch.zeros(self.k, dtype=torch.float64)
        for v, y in zip(self.v, ys, strict=True):
            total += v @ y.reshape(-1).to(device=v.device, dtype=torch.float64)
        return total

    def moved(self, direction: Sequence[torch.Tensor | None], step: float) -> torch.Tensor:
        xs = [x if d is None else x + step * d.reshape(x.shape).to(x.device)
              for x, d in zip(self.xs, direction, strict=True)]
        return self.project(self.run(xs))

    def setup(self) -> None:
        if not self.xs:
            raise NotCheckable("nothing to differentiate: no floating input requires grad and no parameter does")
        self.leaves = [x.clone().requires_grad_() for x in self.xs]
        try:
            self.outs = self.unit(self.leaves)
        except BudgetSpent:
            raise
        except Exception as e:
            raise NotCheckable(f"its forward raised {type(e).__name__} when re-run in float64 copies: "
                               f"{str(e).splitlines()[0] if str(e) else ''}") from e
        if not self.outs:
            raise NotCheckable("it returns no floating-point tensor")
        self.y0 = [y.detach() for y in self.outs]
        again = self.run(self.xs)
        if len(again) != len(self.y0) or any(not torch.equal(a, b) for a, b in zip(again, self.y0, strict=True)):
            raise NotCheckable(
                "two runs at the same inputs and random state gave different outputs: randomness that is not "
                "torch's global generator (Python's random, numpy, a private Generator) or a non-deterministic "
                "kernel; seed it inside the forward, or call model.eval()")
        k = self.k = self.opts.probes
        gen = torch.Generator().manual_seed(self.opts.seed)
        self.v = [_signs(gen, k, y.numel()) for y in self.y0]
        self.u = [_signs(gen, k, x.numel()) for x in self.xs]
        for u, d in zip(self.u, self.unit.inputs, strict=True):
            if d.moved is not None:
                u *= d.moved.reshape(-1).to(u)
        self.y0p = self.project(self.y0)
        self.floor = 4 * _EPS64 * sum(float(y.abs().sum()) for y in self.y0) / self.h

    def autograd_parts(self) -> torch.Tensor:
        """(inputs, k, k): input i's share of v_a^T J u_b by k backward passes."""
        k = self.k
        parts = torch.zeros(len(self.xs), k, k, dtype=torch.float64)
        live = [(o, y) for o, y in enumerate(self.outs) if y.requires_grad]
        if not live:
            return parts
        for a in range(k):
            grads = torch.autograd.grad(
                [y for _, y in live], self.leaves,
                grad_outputs=[self.v[o][a].reshape(y.shape).to(y) for o, y in live],
                retain_graph=True, allow_unused=True)
            for i, g in enumerate(grads):
                if g is not None:
                    parts[i, a] = self.u[i] @ g.detach().reshape(-1).cpu()
        return parts

    def backward_along(self, weights: Sequence[torch.Tensor], b: int) -> float:
        """w^T J u_b by one backward pass through the base graph, w given per output."""
        live = [(o, y) for o, y in enumerate(self.outs) if y.requires_grad]
        if not live:
            return 0.0
        grads = torch.autograd.grad([y for _, y in live], self.leaves,
                                    [weights[o].reshape(y.shape).to(y) for o, y in live],
                                    retain_graph=True, allow_unused=True)
        return float(sum(float(self.u[i][b] @ g.detach().reshape(-1).cpu()) for i, g in enumerate(grads)
                         if g is not None))

    def along(self, b: int, step: float, only: int | None = None) -> torch.Tensor:
        direction = [self.u[i][b] if only in (None, i) else None for i in range(len(self.xs))]
        return self.moved(direction, step)


def screen(unit: Unit, opts: Options) -> Outcome:
    """Screen `unit`'s backward; raises NotCheckable, or BudgetSpent when the budget runs out."""
    p = _Probed(unit, opts)
    p.setup()
    try:
        parts = p.autograd_parts()
    except BudgetSpent:
        raise
    except RuntimeError as e:
        return Outcome(False, reason=f"backward raised {type(e).__name__}: {str(e).splitlines()[0]}")
    k, h = p.k, p.h
    plus = torch.stack([p.along(b, h) for b in range(k)], dim=1)
    minus = torch.stack([p.along(b, -h) for b in range(k)], dim=1)
    numerical = (plus - minus) / (2 * h)
    autograd = parts.sum(0)
    outcome = _compare(autograd, numerical, p, opts)
    outcome.parts = parts
    if not outcome.passed and outcome.reason is None:
        _kinks(outcome, autograd, numerical, p, opts)
    p.outs = []  # frees the graph kept for the kink test's backward passes
    outcome.checks.append("rev")
    if outcome.passed and "fwd" in opts.modes:
        _forward(outcome, numerical, p, opts)
    if outcome.passed and opts.order == 2:
        _second(outcome, p, opts)
    return outcome


def _compare(autograd: torch.Tensor, numerical: torch.Tensor, p: _Probed, opts: Options,
             check: str = "rev") -> Outcome:
    gap = (autograd - numerical).abs()
    scale = max(float(autograd.abs().max()), float(numerical.abs().max()))
    tol = opts.atol + opts.rtol * scale + p.floor
    if not bool(torch.isfinite(gap).all()):
        return Outcome(False, check=check, reason="a probe is NaN or infinite", tol=tol)
    worst = int(gap.argmax())
    row, column = divmod(worst, gap.shape[1])
    biggest = float(gap.max())
    out = Outcome(biggest <= tol, check=check, abs_error=biggest, rel_error=biggest / scale if scale else float("inf"),
                  row=row, column=column, tol=tol)
    if not out.passed:
        out.ratio = _ratio(autograd, numerical, tol, opts.rtol)
    return out


def _ratio(autograd: torch.Tensor, numerical: torch.Tensor, tol: float, rtol: float) -> float | None:
    """r when autograd is r x finite differences on every probe (a wrong factor), else None."""
    denominator = float((numerical * numerical).sum())
    if denominator == 0:
        return None
    r = float((autograd * numerical).sum()) / denominator
    if float((autograd - r * numerical).abs().max()) <= tol and abs(r - 1) > rtol:
        return r
    return None


def _kinks(out: Outcome, autograd: torch.Tensor, numerical: torch.Tensor, p: _Probed, opts: Options) -> None:
    """Probes that missed only through outputs at a kink pass under kinks="pass"; the outcome says so.

    A probe sums many elements, and at several kinks at once (max-pool's ties after a ReLU) no
    pair of one-sided slopes bounds the sum. So each missing direction u_b is stepped again at
    ±h and ±2h, and `gradcheck`'s kink test finds, output element by output element, where
    the function has a corner along u_b; the missing probes are compared again without those
    outputs (one more backward pass each). What still misses is a wrong backward.
    """
    gap = (autograd - numerical).abs()
    bad = gap > out.tol
    masked = 0
    for b in [int(c) for c in bad.any(0).nonzero().reshape(-1)]:
        direction = [u[b].reshape(x.shape).to(x) for x, u in zip(p.xs, p.u, strict=True)]
        steps = [p.run([x + f * p.h * d for x, d in zip(p.xs, direction, strict=True)])
                 for f in (1.0, -1.0, 2.0, -2.0)]
        kinks, central = [], []
        for o, y0 in enumerate(p.y0):
            column = [s[o].reshape(-1, 1).cpu() for s in steps]
            kink, _, _, _ = probe_steps(tuple(column), y0.reshape(-1, 1).cpu(), h=p.h, floor=p.floor,  # type: ignore[arg-type]
                                        atol=opts.atol, rtol=opts.rtol, tested={"a": column[0]})
            kinks.append(kink.reshape(-1))
            central.append(((column[0] - column[1]) / (2 * p.h)).reshape(-1))
        if not any(bool(k.any()) for k in kinks):
            return  # smooth along u_b: the miss is the backward's
        masked += int(sum(int(k.sum()) for k in kinks))
        for a in [int(r) for r in bad[:, b].nonzero().reshape(-1)]:
            weights = [v[a] * ~k for v, k in zip(p.v, kinks, strict=True)]
            fd = sum(float(w @ c) for w, c in zip(weights, central, strict=True))
            ag = p.backward_along(weights, b)
            if abs(ag - fd) > out.tol:
                return
    if opts.kinks == "fail":
        out.notes.append(f"the failing probes cross kinks at {masked} output element(s) and agree without them: "
                         "pass kinks='pass' to accept that")
        return
    out.passed = True
    out.ratio = None
    out.notes.append(f"{int(bad.sum())} probe(s) crossed a kink (ReLU at 0, max-pool ties, abs at 0) at {masked} "
                     f"output element(s) and agree without them: passed under kinks={opts.kinks!r}")


def _forward(out: Outcome, numerical: torch.Tensor, p: _Probed, opts: Options) -> None:
    """Forward mode: v_a^T (J u_b) by jvp against the same finite differences."""
    import torch.autograd.forward_ad as fwad

    columns = []
    try:
        for b in range(p.k):
            with fwad.dual_level():
                duals = [fwad.make_dual(x, u[b].reshape(x.shape).to(x)) for x, u in zip(p.xs, p.u, strict=True)]
                ys = p.unit(duals)
                tangents = [fwad.unpack_dual(y).tangent for y in ys]
            columns.append(p.project([torch.zeros_like(y) if t is None else t.detach()
                                      for y, t in zip(ys, tangents, strict=True)]))
    except BudgetSpent:
        raise
    except (RuntimeError, NotImplementedError) as e:
        out.notes.append(f"forward mode not checked: {type(e).__name__}: {str(e).splitlines()[0]}")
        return
    found = _compare(torch.stack(columns, dim=1), numerical, p, opts, check="fwd")
    out.checks.append("fwd")
    if not found.passed:
        found.parts, found.checks, found.notes = None, out.checks, out.notes
        out.__dict__.update({s: getattr(found, s) for s in found.__dataclass_fields__})


def _second(out: Outcome, p: _Probed, opts: Options) -> None:
    """Second order: u_c^T H u_b of v_0^T f by double backward against differences of the gradient."""
    v0 = [v[0] for v in p.v]

    def gradient(xs: Sequence[torch.Tensor], create: bool) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        leaves = [x.detach().requires_grad_() for x in xs]
        ys = p.unit(leaves)
        live = [(o, y) for o, y in enumerate(ys) if y.requires_grad]
        if not live:
            return leaves, [torch.zeros_like(x) for x in leaves]
        gs = torch.autograd.grad([y for _, y in live], leaves, [v0[o].reshape(y.shape).to(y) for o, y in live],
                                 create_graph=create, allow_unused=True)
        return leaves, [torch.zeros_like(x) if g is None else g for x, g in zip(leaves, gs, strict=True)]

    def dot_u(gs: Sequence[torch.Tensor], b: int) -> torch.Tensor:
        return sum((g.reshape(-1) * u[b].to(g)).sum() for g, u in zip(gs, p.u, strict=True))  # type: ignore[return-value]

    k = p.k
    try:
        leaves, gs = gradient(p.xs, True)
        analytic = torch.zeros(k, k, dtype=torch.float64)
        for b in range(k):
            s = dot_u(gs, b)
            if not s.requires_grad:
                continue
            hs = torch.autograd.grad(s, leaves, retain_graph=True, allow_unused=True)
            for c in range(k):
                second = [torch.zeros_like(x) if g is None else g for x, g in zip(leaves, hs, strict=True)]
                analytic[c, b] = float(dot_u(second, c))
        numerical = torch.zeros(k, k, dtype=torch.float64)
        for c in range(k):
            direction = [u[c].reshape(x.shape).to(x) for x, u in zip(p.xs, p.u, strict=True)]
            _, gp = gradient([x + p.h * d for x, d in zip(p.xs, direction, strict=True)], False)
            _, gm = gradient([x - p.h * d for x, d in zip(p.xs, direction, strict=True)], False)
            for b in range(k):
                numerical[c, b] = float(dot_u(gp, b) - dot_u(gm, b)) / (2 * p.h)
    except BudgetSpent:
        raise
    except RuntimeError as e:
        out.notes.append(f"second order not checked: {type(e).__name__}: {str(e).splitlines()[0]}")
        return
    found = _compare(analytic, numerical, p, opts, check="rev2")
    out.checks.append("rev2")
    if not found.passed:
        found.parts, found.checks, found.notes = None, out.checks, out.notes
        out.__dict__.update({s: getattr(found, s) for s in found.__dataclass_fields__})


@dataclass(frozen=True, slots=True)
class Narrowed:
    """The input whose gradient is wrong, and one element of it."""

    input: str
    abs_error: float
    rel_error: float
    ratio: float | None
    element: str | None


def narrow(unit: Unit, opts: Options, out: Outcome) -> Narrowed | None:
    """The input (or parameter) that fails the worst probe alone, then its worst element, by bisection."""
    if out.parts is None or out.check != "rev":
        return None
    p = _Probed(unit, opts)
    p.setup()
    b, a = out.column, out.row
    best: tuple[float, int, torch.Tensor, torch.Tensor] | None = None
    for i in range(len(p.xs)):
        numerical = (p.along(b, p.h, only=i) - p.along(b, -p.h, only=i)) / (2 * p.h)
        autograd = out.parts[i][:, b]
        gap = float((autograd - numerical).abs().max())
        if best is None or gap > best[0]:
            best = (gap, i, autograd, numerical)
    if best is None:
        return None
    gap, i, autograd, numerical = best
    scale = max(float(autograd.abs().max()), float(numerical.abs().max()))
    ratio = _ratio(autograd, numerical, opts.atol + opts.rtol * scale + p.floor, opts.rtol)
    element = _element(p, i, a, b, opts)
    return Narrowed(unit.inputs[i].name, gap, gap / scale if scale else float("inf"), ratio, element)


def _element(p: _Probed, i: int, a: int, b: int, opts: Options) -> str | None:
    """Bisect input i's elements along u_b for the one where v_a^T J u_b misses most; its index, in words."""
    leaves = [x.clone().requires_grad_() for x in p.xs]
    ys = p.unit(leaves)
    live = [(o, y) for o, y in enumerate(ys) if y.requires_grad]
    if not live:
        return None
    try:
        (g,) = torch.autograd.grad([y for _, y in live], [leaves[i]],
                                   [p.v[o][a].reshape(y.shape).to(y) for o, y in live], allow_unused=True)
    except RuntimeError:
        return None
    grad = torch.zeros(p.xs[i].numel(), dtype=torch.float64) if g is None else g.detach().reshape(-1).cpu()
    u = p.u[i][b]
    lo, hi = 0, u.numel()

    def miss(start: int, stop: int) -> tuple[float, float, float]:
        d = torch.zeros_like(u)
        d[start:stop] = u[start:stop]
        direction = [d if j == i else None for j in range(len(p.xs))]
        numerical = float((p.moved(direction, p.h)[a] - p.moved(direction, -p.h)[a]) / (2 * p.h))
        autograd = float(grad[start:stop] @ u[start:stop])
        return abs(autograd - numerical), autograd, numerical

    found = miss(lo, hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        left, right = miss(lo, mid), miss(mid, hi)
        if max(left[0], right[0]) <= opts.atol + p.floor:
            break  # the error is spread over both halves: the range is the answer
        lo, hi, found = (lo, mid, left) if left[0] >= right[0] else (mid, hi, right)
    shape = tuple(p.xs[i].shape)
    if hi - lo == 1:
        index = tuple(int(n) for n in torch.unravel_index(torch.tensor(lo), shape)) if shape else ()
        where = f"element {index}"
    else:
        where = f"flat elements {lo}..{hi - 1}"
    sign = float(u[lo]) if hi - lo == 1 else 1.0
    return (f"{where} of shape {shape}: autograd {sign * found[1]:.6g}, finite differences "
            f"{sign * found[2]:.6g} (weighted over the outputs by a random ±1 vector)")
