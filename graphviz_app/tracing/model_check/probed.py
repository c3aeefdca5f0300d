"""The screen's shared pieces: its options and outcome, a unit at its inputs with its random directions, comparison.

`screen` (in `probes`) uses them, and so do forward mode and second order (`modes`) and the
narrowing of a failure to an input and an element (`narrowing`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from .units import BudgetSpent, Unit

__all__ = ["EPS64", "FLOAT32", "NotCheckable", "Float64Failed", "Options", "Outcome", "Probed", "signs", "compare",
           "constant_ratio"]

EPS64 = 2.220446049250313e-16
# A unit checked in float32 (its float64 copies cannot run): machine epsilon, the central-difference
# step (truncation error about h^2 times the third derivative / 6, rounding about eps / h: both near
# 1e-5 at h = 1e-2) and the least rtol and atol a probe gets (float32 sums round at about 1e-6 relative).
FLOAT32 = {"eps": 1.1920928955078125e-07, "step": 1e-2, "rtol": 1e-3, "atol": 1e-5}
# Float64 copies whose output is float32 (a forward casting down): the inputs move in float64, so the step need
# only absorb float32's rounding at the output (about 4 eps / h of the output's size), while every parameter
# moves at once along a direction, so a large step leaves a truncation error. Measured: 1e-2 left 2% on a tanh
# layer, 1e-3 left 9e-4 on transformers' GPT-2 (tied embeddings, loss after .float()); 1e-4 passes both, and
# still finds a backward 1% wrong.
NARROW_OUTPUT_STEP = 1e-4


class NotCheckable(Exception):
    """The unit cannot be checked; the message says why."""


class Float64Failed(NotCheckable):
    """The unit's float64 copies cannot run (a kernel or Function for float32 or bfloat16 only)."""


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


def signs(gen: torch.Generator, k: int, n: int) -> torch.Tensor:
    return torch.randint(0, 2, (k, n), generator=gen, dtype=torch.float64) * 2 - 1


class Probed:
    """The unit at its inputs, with the random directions and projections the screen shares."""

    def __init__(self, unit: Unit, opts: Options) -> None:
        self.unit, self.opts = unit, opts
        self.xs = [d.value for d in unit.inputs]
        wide = unit.dtype == torch.float64
        self.h = opts.eps if wide else max(opts.eps, FLOAT32["step"])
        self.rtol = opts.rtol if wide else max(opts.rtol, FLOAT32["rtol"])
        self.atol = opts.atol if wide else max(opts.atol, FLOAT32["atol"])
        self.machine_eps = EPS64 if wide else FLOAT32["eps"]
        self.notes: list[str] = []

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
        xs = [x if d is None else x + step * d.reshape(x.shape).to(x)
              for x, d in zip(self.xs, direction, strict=True)]
        return self.project(self.run(xs))

    def shift(self, size: float) -> None:
        """Move the point: every differentiated value by size (1 + |x|) times a random factor of 0.5 to 1.5 in
        random sign (not the fixed rows); the spread in size breaks ties (equal zeros under a max-pool)."""
        gen = torch.Generator().manual_seed(self.opts.seed + 1)
        moved = []
        for x, d in zip(self.xs, self.unit.inputs, strict=True):
            spread = 0.5 + torch.rand(x.numel(), generator=gen, dtype=torch.float64)
            r = (signs(gen, 1, x.numel())[0] * spread).reshape(x.shape).to(x)
            if d.moved is not None:
                r = r * d.moved.reshape(x.shape).to(x)
            moved.append(x + size * (1 + x.abs()) * r)
        self.xs = moved

    def setup(self) -> None:
        if not self.xs:
            raise NotCheckable("nothing to differentiate: no floating input requires grad and no parameter does")
        self.leaves = [x.clone().requires_grad_() for x in self.xs]
        try:
            self.outs = self.unit(self.leaves)
        except BudgetSpent:
            raise
        except Exception as e:
            where = "float64 copies" if self.unit.dtype == torch.float64 else "float32 copies"
            raise Float64Failed(f"its forward raised {type(e).__name__} when re-run in {where}: "
                                f"{str(e).splitlines()[0] if str(e) else ''}") from e
        if not self.outs:
            raise NotCheckable("it returns no floating-point tensor")
        self.y0 = [y.detach() for y in self.outs]
        self._at_output_precision()
        again = self.run(self.xs)
        if len(again) != len(self.y0) or any(not torch.equal(a, b) for a, b in zip(again, self.y0, strict=True)):
            raise NotCheckable(
                "two runs at the same inputs and random state gave different outputs: randomness that is not "
                "torch's global generator (Python's random, numpy, a private Generator) or a non-deterministic "
                "kernel; seed it inside the forward, or call model.eval()")
        k = self.k = self.opts.probes
        gen = torch.Generator().manual_seed(self.opts.seed)
        self.v = [signs(gen, k, y.numel()) for y in self.y0]
        self.u = [signs(gen, k, x.numel()) for x in self.xs]
        for u, d in zip(self.u, self.unit.inputs, strict=True):
            if d.moved is not None:
                u *= d.moved.reshape(-1).to(u)
        self.y0p = self.project(self.y0)
        self.floor = 4 * self.machine_eps * sum(float(y.abs().double().sum()) for y in self.y0) / self.h

    def _at_output_precision(self) -> None:
        """Float64 copies whose forward casts down (transformers' loss runs `logits.float()`) give outputs no finer
        than float32: finite differences of them can only be read at float32's precision, so the unit is
        checked with float32's step and tolerances, and a note says why."""
        narrow = sorted({str(y.dtype).removeprefix("torch.") for y in self.y0
                         if y.is_floating_point() and torch.finfo(y.dtype).eps > EPS64})
        if self.unit.dtype != torch.float64 or not narrow:
            return
        self.h, self.machine_eps = max(self.opts.eps, NARROW_OUTPUT_STEP), FLOAT32["eps"]
        self.rtol, self.atol = max(self.opts.rtol, FLOAT32["rtol"]), max(self.opts.atol, FLOAT32["atol"])
        self.notes.append(f"its output is {' and '.join(narrow)} though it ran on float64 copies (its forward casts "
                          f"down, e.g. a loss computed after .float()): checked at float32's precision (step "
                          f"{self.h:g}, rtol {self.rtol:g}, atol {self.atol:g})")

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
                    parts[i, a] = self.u[i] @ g.detach().reshape(-1).cpu().double()
        return parts

    def backward_along(self, weights: Sequence[torch.Tensor], b: int) -> float:
        """w^T J u_b by one backward pass through the base graph, w given per output."""
        live = [(o, y) for o, y in enumerate(self.outs) if y.requires_grad]
        if not live:
            return 0.0
        grads = torch.autograd.grad([y for _, y in live], self.leaves,
                                    [weights[o].reshape(y.shape).to(y) for o, y in live],
                                    retain_graph=True, allow_unused=True)
        return float(sum(float(self.u[i][b] @ g.detach().reshape(-1).cpu().double()) for i, g in enumerate(grads)
                         if g is not None))

    def along(self, b: int, step: float, only: int | None = None) -> torch.Tensor:
        direction = [self.u[i][b] if only in (None, i) else None for i in range(len(self.xs))]
        return self.moved(direction, step)


def compare(autograd: torch.Tensor, numerical: torch.Tensor, p: Probed, opts: Options,
             check: str = "rev") -> Outcome:
    gap = (autograd - numerical).abs()
    scale = max(float(autograd.abs().max()), float(numerical.abs().max()))
    tol = p.atol + p.rtol * scale + p.floor
    if not bool(torch.isfinite(gap).all()):
        return Outcome(False, check=check, reason="a probe is NaN or infinite", tol=tol)
    worst = int(gap.argmax())
    row, column = divmod(worst, gap.shape[1])
    biggest = float(gap.max())
    out = Outcome(biggest <= tol, check=check, abs_error=biggest, rel_error=biggest / scale if scale else float("inf"),
                  row=row, column=column, tol=tol)
    if not out.passed:
        out.ratio = constant_ratio(autograd, numerical, tol, p.rtol)
    return out


def constant_ratio(autograd: torch.Tensor, numerical: torch.Tensor, tol: float, rtol: float) -> float | None:
    """r when autograd is r x finite differences on every probe (a wrong factor), else None."""
    denominator = float((numerical * numerical).sum())
    if denominator == 0:
        return None
    r = float((autograd * numerical).sum()) / denominator
    if float((autograd - r * numerical).abs().max()) <= tol and abs(r - 1) > rtol:
        return r
    return None
