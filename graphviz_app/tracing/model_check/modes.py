"""Forward mode and second order of one unit, by the screen's random directions."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .probed import Options, Outcome, Probed, compare
from .units import BudgetSpent

__all__ = ["check_forward", "check_second"]


def check_forward(out: Outcome, numerical: torch.Tensor, p: Probed, opts: Options) -> None:
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
    found = compare(torch.stack(columns, dim=1), numerical, p, opts, check="fwd")
    out.checks.append("fwd")
    if not found.passed:
        found.parts, found.checks, found.notes = None, out.checks, out.notes
        out.__dict__.update({s: getattr(found, s) for s in found.__dataclass_fields__})


def check_second(out: Outcome, p: Probed, opts: Options) -> None:
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
    found = compare(analytic, numerical, p, opts, check="rev2")
    out.checks.append("rev2")
    if not found.passed:
        found.parts, found.checks, found.notes = None, out.checks, out.notes
        out.__dict__.update({s: getattr(found, s) for s in found.__dataclass_fields__})
