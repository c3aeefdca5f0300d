"""Central finite differences: all perturbed inputs batched through vmap, or a loop."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.func import vmap

from ._autograd import first_line
from ._chunks import ChunkStats, plan_chunk, run_chunked
from ._devices import is_out_of_memory
from ._inputs import call_outputs

__all__ = ["NumericalResult", "numerical_jacobian", "rounding_floor"]

Pair = tuple[int, int]


def rounding_floor(dtype: torch.dtype, scale: float, eps: float) -> float:
    """The rounding error of a central difference: unit roundoff x |f| / eps."""
    return torch.finfo(dtype).eps * scale / eps


@dataclass(slots=True)
class NumericalResult:
    """Finite-difference Jacobians (float64, (m_o, n_i)), and where the function kinks.

    `kinks[pair]` marks elements whose one-sided slopes (f(x+h)-f(x))/h and
    (f(x)-f(x-h))/h differ by more than the tolerance: the function is not
    differentiable there, so a central difference cannot be trusted.
    """

    jac: dict[Pair, torch.Tensor]
    kinks: dict[Pair, torch.Tensor]
    method: str
    stats: ChunkStats
    floors: dict[int, float]
    notes: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _Slot:
    """One differentiated input being perturbed, and what its chunk workers share."""

    fn: Callable[..., Any]
    args: Sequence[Any]
    index: int
    checked: Sequence[int]
    base: Sequence[torch.Tensor]
    eps: float
    atol: float
    rtol: float
    floors: dict[int, float]
    result: NumericalResult

    def call(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The checked outputs of fn with this slot's input replaced by `x`."""
        call = list(self.args)
        call[self.index] = x
        outs = call_outputs(self.fn, call)
        return tuple(outs[o] for o in self.checked)


def numerical_jacobian(
    fn: Callable[..., Any],
    args: Sequence[Any],
    diff: Sequence[int],
    checked: Sequence[int],
    base: Sequence[torch.Tensor],
    *,
    eps: float,
    atol: float,
    rtol: float,
    budget_bytes: int,
    device: torch.device,
) -> NumericalResult:
    """Central differences (f(x + eps e_j) - f(x - eps e_j)) / 2 eps for every input element.

    Args:
        base: fn's checked outputs at the unperturbed `args` (for kink detection).
    """
    floors = {o: rounding_floor(y.dtype, _max_abs(y), eps) for o, y in zip(checked, base)}
    jac = {
        (o, i): torch.zeros(y.numel(), args[i].numel(), dtype=torch.float64, device=device)
        for o, y in zip(checked, base)
        for i in diff
    }
    kinks = {pair: torch.zeros(t.shape, dtype=torch.bool, device=device) for pair, t in jac.items()}
    n_in = sum(x.numel() for x in args if isinstance(x, torch.Tensor))
    stats = plan_chunk(
        budget_bytes=budget_bytes,
        item_elements=2 * (n_in + sum(y.numel() for y in base)),
        itemsize=max(args[i].element_size() for i in diff),
        total=max(args[i].numel() for i in diff),
    )
    result = NumericalResult(jac, kinks, "vmap", stats, floors)
    for i in diff:
        slot = _Slot(fn, args, i, checked, base, eps, atol, rtol, floors, result)
        run_chunked(args[i].numel(), stats, lambda a, b, s=slot: _work(s, a, b), device)
    return result


def _max_abs(y: torch.Tensor) -> float:
    return float(y.detach().abs().max()) if y.numel() else 0.0


def _work(slot: _Slot, start: int, stop: int) -> None:
    if slot.result.method == "vmap":
        try:
            _batched(slot, start, stop)
            return
        except Exception as e:  # noqa: BLE001 - the loop below re-raises real bugs
            if is_out_of_memory(e):
                raise
            slot.result.method = "loop"
            slot.result.notes.append(
                "finite differences ran one element at a time because fn cannot be "
                f"vmapped ({first_line(e)}). In-place ops on inputs, .item(), data-dependent "
                "if/while and autograd.Functions without setup_context + "
                "generate_vmap_rule=True prevent batching; the results are the same, only slower."
            )
    for j in range(start, stop):
        _single(slot, j)


def _batched(slot: _Slot, start: int, stop: int) -> None:
    x = slot.args[slot.index]
    count = stop - start
    batch = x.reshape(1, -1).repeat(2 * count, 1)
    rows = torch.arange(count, device=x.device)
    cols = torch.arange(start, stop, device=x.device)
    batch[rows, cols] += slot.eps
    batch[rows + count, cols] -= slot.eps
    outs = vmap(slot.call)(batch.reshape(2 * count, *x.shape))
    for o, y in zip(slot.checked, outs):
        flat = y.reshape(2 * count, -1)
        _store(slot, o, start, stop, flat[:count], flat[count:])


def _single(slot: _Slot, j: int) -> None:
    x = slot.args[slot.index]
    plus, minus = x.reshape(-1).clone(), x.reshape(-1).clone()
    plus[j] += slot.eps
    minus[j] -= slot.eps
    outs_plus = slot.call(plus.reshape(x.shape))
    outs_minus = slot.call(minus.reshape(x.shape))
    for o, yp, ym in zip(slot.checked, outs_plus, outs_minus):
        _store(slot, o, j, j + 1, yp.reshape(1, -1), ym.reshape(1, -1))


def _store(
    slot: _Slot, o: int, start: int, stop: int, plus: torch.Tensor, minus: torch.Tensor
) -> None:
    """Writes columns [start, stop) of d output o / d input: rows of `plus` are columns."""
    plus, minus = plus.detach(), minus.detach()
    central = (plus - minus).to(torch.float64) / (2 * slot.eps)
    base = slot.base[slot.checked.index(o)].detach().reshape(1, -1).to(torch.float64)
    # d+ - d- = (f(x+h) - 2 f(x) + f(x-h)) / h: an O(1) jump at a kink, O(h f'') where smooth.
    jump = (plus.to(torch.float64) - 2 * base + minus.to(torch.float64)).abs() / slot.eps
    limit = slot.atol + slot.rtol * central.abs() + 4 * slot.floors[o]
    pair = (o, slot.index)
    slot.result.jac[pair][:, start:stop] = central.T
    slot.result.kinks[pair][:, start:stop] = (jump > limit).T
