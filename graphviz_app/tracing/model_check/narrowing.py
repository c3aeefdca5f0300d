"""A failing unit narrowed: the input (or parameter) whose gradient is wrong, then one element of it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from .probed import Options, Outcome, Probed, constant_ratio
from .units import Unit

__all__ = ["Narrowed", "narrow"]


@dataclass(frozen=True, slots=True)
class Narrowed:
    """The input whose gradient is wrong, and one element of it."""

    input: str
    abs_error: float
    rel_error: float
    ratio: float | None
    element: str | None
    no_path: bool = False  # the autograd graph joins no output to this input: a gradient cut, not a wrong one


def narrow(unit: Unit, opts: Options, out: Outcome) -> Narrowed | None:
    """The input (or parameter) that fails the worst probe alone, then its worst element, by bisection."""
    if out.parts is None or out.check != "rev":
        return None
    p = Probed(unit, opts)
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
    ratio = constant_ratio(autograd, numerical, p.atol + p.rtol * scale + p.floor, p.rtol)
    element = _element(p, i, a, b, opts)
    no_path = not reaches([y for y in p.outs if y.requires_grad], p.leaves[i])
    return Narrowed(unit.inputs[i].name, gap, gap / scale if scale else float("inf"), ratio, element, no_path)


def reaches(outputs: list[torch.Tensor], leaf: torch.Tensor) -> bool:
    """Whether the autograd graph of `outputs` leads back to `leaf` (walks `next_functions`, iteratively)."""
    seen: set[object] = set()
    todo: list[Any] = [y.grad_fn for y in outputs if y.grad_fn is not None]
    while todo:
        fn = todo.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        if getattr(fn, "variable", None) is leaf:  # AccumulateGrad of the leaf
            return True
        todo.extend(f for f, _ in fn.next_functions)
    return False


def _element(p: Probed, i: int, a: int, b: int, opts: Options) -> str | None:
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
    grad = torch.zeros(p.xs[i].numel(), dtype=torch.float64) if g is None else g.detach().reshape(-1).cpu().double()
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
        if max(left[0], right[0]) <= p.atol + p.floor:
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
