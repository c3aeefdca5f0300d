"""Fast mode: compare u^T J v for random unit vectors u, v instead of whole Jacobians."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from gradcheck._compare import PairData, Probe
from gradcheck._inputs import call_outputs

__all__ = ["Projections", "random_projections", "analytic_projections", "project_fast"]

Pair = tuple[int, int]


@dataclass(frozen=True, slots=True)
class Projections:
    """The random unit vectors: `u[o]` over output o's elements, `v[i]` over input i's."""

    u: dict[int, torch.Tensor]
    v: dict[int, torch.Tensor]


def random_projections(
    out_sizes: dict[int, int], in_sizes: dict[int, int], *, seed: int, device: torch.device
) -> Projections:
    """Positive random unit vectors from a seeded CPU generator, so runs repeat exactly."""
    gen = torch.Generator().manual_seed(seed)

    def unit(size: int) -> torch.Tensor:
        vec = torch.rand(size, generator=gen, dtype=torch.float64) + 0.5
        unit_vec: torch.Tensor = (vec / vec.norm()).to(device)
        return unit_vec

    return Projections(
        u={o: unit(m) for o, m in out_sizes.items()}, v={i: unit(n) for i, n in in_sizes.items()}
    )


def project_fast(
    fn: Callable[..., Any],
    analytic: dict[Pair, float],
    num_args: Sequence[Any],
    base: Sequence[torch.Tensor],
    *,
    diff: Sequence[int],
    checked: Sequence[int],
    expected: dict[Pair, torch.Tensor],
    proj: Projections,
    eps: float,
    atol: float,
    rtol: float,
) -> list[PairData]:
    """One scalar per pair from each side: u^T J v by autograd, differences and `expected`.

    `analytic` holds autograd's u^T J v per pair; `base` fn's checked outputs at
    `num_args`. The absolute tolerance is scaled by
    sum(u) * sum(v), as torch's fast mode does, since each projection sums that
    many weighted element errors.
    """
    data = []
    for i in diff:
        x = num_args[i]
        step = eps * proj.v[i].reshape(x.shape).to(x.dtype)
        plus = call_outputs(fn, _replace(num_args, i, x + step))
        minus = call_outputs(fn, _replace(num_args, i, x - step))
        for k, o in enumerate(checked):
            u = proj.u[o]
            # Values only: a function that takes gradients itself returns outputs that require grad.
            yp = plus[o].detach().reshape(-1).to(torch.float64)
            ym = minus[o].detach().reshape(-1).to(torch.float64)
            y0 = base[k].detach().reshape(-1).to(torch.float64)
            numeric = float(u @ (yp - ym)) / (2 * eps)
            jump = float(u @ (yp - 2 * y0 + ym).abs()) / eps
            e = expected.get((o, i))
            ex = None if e is None else float(u @ e.reshape(u.numel(), -1) @ proj.v[i])
            scaled_atol = atol * float(u.sum()) * float(proj.v[i].sum())
            data.append(
                PairData(
                    output_index=o,
                    input_index=i,
                    output_shape=(),
                    input_shape=(),
                    autograd=_scalar(analytic[(o, i)]),
                    numerical=_scalar(numeric),
                    expected=None if ex is None else _scalar(ex),
                    probe=_kink_probe(jump > scaled_atol + rtol * abs(numeric)),
                    atol=scaled_atol,
                    rtol=rtol,
                )
            )
    return data


def analytic_projections(
    outs: Sequence[torch.Tensor],
    leaves: Sequence[Any],
    diff: Sequence[int],
    checked: Sequence[int],
    proj: Projections,
) -> dict[Pair, float]:
    """u^T J v through one vector-Jacobian product per output."""
    values = {(o, i): 0.0 for o in checked for i in diff}
    for o in checked:
        y = outs[o]
        if not y.requires_grad:
            continue
        grads = torch.autograd.grad(
            y,
            [leaves[i] for i in diff],
            grad_outputs=proj.u[o].reshape(y.shape).to(y.dtype),
            retain_graph=True,
            allow_unused=True,
        )
        for i, g in zip(diff, grads, strict=True):
            if g is not None:
                values[(o, i)] = float(g.reshape(-1).to(torch.float64) @ proj.v[i])
    return values


def _replace(args: Sequence[Any], i: int, x: torch.Tensor) -> list[Any]:
    call = list(args)
    call[i] = x
    return call


def _kink_probe(kink: bool) -> Probe:
    """A kink seen by the projection: one-sided slopes of u^T f along v differ."""
    no = torch.tensor([False])
    return Probe(kink=torch.tensor([kink]), verified=no, valid={}, smooth=no)


def _scalar(value: float) -> torch.Tensor:
    return torch.tensor([value], dtype=torch.float64)
