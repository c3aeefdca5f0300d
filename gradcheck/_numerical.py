"""Central finite differences: all perturbed inputs batched through vmap, or a loop."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.func import vmap

from gradcheck._autograd import first_line
from gradcheck._chunks import ChunkStats, plan_chunk, run_chunked
from gradcheck._devices import is_out_of_memory
from gradcheck._inputs import call_outputs

__all__ = ["NumericalResult", "numerical_jacobian", "kink_mask", "rounding_floor"]

Pair = tuple[int, int]


def rounding_floor(dtype: torch.dtype, scale: float, eps: float) -> float:
    """The rounding error of a central difference: unit roundoff x |f| / eps."""
    return torch.finfo(dtype).eps * scale / eps


@dataclass(slots=True)
class NumericalResult:
    """Finite-difference Jacobians: float64 (m_o, n_i) per pair, and how they were made."""

    jac: dict[Pair, torch.Tensor]
    method: str
    stats: ChunkStats
    floors: dict[int, float]
    notes: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _Slot:
    """One differentiated input being perturbed, and where its columns go."""

    fn: Callable[..., Any]
    args: Sequence[Any]
    index: int
    checked: Sequence[int]
    eps: float
    result: NumericalResult
    jac: dict[int, torch.Tensor]  # per output: its (m_o, n_i) Jacobian, filled column by column

    def call(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The checked outputs of fn with this slot's input replaced by `x`."""
        call = list(self.args)
        call[self.index] = x
        outs = call_outputs(self.fn, call)
        return tuple(outs[o] for o in self.checked)

    def evaluate(
        self, cols: torch.Tensor, method: str
    ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """fn at x + eps e_j and x - eps e_j for each j in `cols`: (plus, minus) per output.

        Each tensor has one row per column j, flattened over the output's elements.
        """
        x = self.args[self.index]
        count = cols.numel()
        batch = x.reshape(1, -1).repeat(2 * count, 1)
        rows = torch.arange(count, device=x.device)
        batch[rows, cols] += self.eps
        batch[rows + count, cols] -= self.eps
        batch = batch.reshape(2 * count, *x.shape)
        if method == "vmap":
            outs = [y.reshape(2 * count, -1) for y in vmap(self.call)(batch)]
        else:
            each = [self.call(b) for b in batch]
            outs = [torch.stack([e[k].reshape(-1) for e in each]) for k in range(len(self.checked))]
        return [y[:count] for y in outs], [y[count:] for y in outs]


def numerical_jacobian(
    fn: Callable[..., Any],
    args: Sequence[Any],
    diff: Sequence[int],
    checked: Sequence[int],
    base: Sequence[torch.Tensor],
    *,
    eps: float,
    budget_bytes: int,
    device: torch.device,
) -> NumericalResult:
    """Central differences (f(x + eps e_j) - f(x - eps e_j)) / 2 eps for every input element.

    Args:
        base: fn's checked outputs at the unperturbed `args` (sizes and rounding floors).
    """
    floors = {o: rounding_floor(y.dtype, _max_abs(y), eps) for o, y in zip(checked, base)}
    n_in = sum(x.numel() for x in args if isinstance(x, torch.Tensor))
    stats = plan_chunk(
        budget_bytes=budget_bytes,
        item_elements=2 * (n_in + sum(y.numel() for y in base)),
        itemsize=max(args[i].element_size() for i in diff),
        total=max(args[i].numel() for i in diff),
    )
    result = NumericalResult({}, "vmap", stats, floors)
    for i in diff:
        jac = {
            o: torch.empty(y.numel(), args[i].numel(), dtype=torch.float64, device=device)
            for o, y in zip(checked, base)
        }
        slot = _Slot(fn, args, i, checked, eps, result, jac)
        run_chunked(args[i].numel(), stats, functools.partial(_work, slot), device)
        result.jac.update({(o, i): t for o, t in jac.items()})
    return result


def kink_mask(
    fn: Callable[..., Any],
    args: Sequence[Any],
    pair: Pair,
    checked: Sequence[int],
    base: torch.Tensor,
    cols: torch.Tensor,
    *,
    eps: float,
    method: str,
    limit: torch.Tensor,
) -> torch.Tensor:
    """Which of the input elements `cols` are kinks of output `pair[0]`, shape (m_o, len(cols)).

    A kink is where the one-sided slopes (f(x+h)-f(x))/h and (f(x)-f(x-h))/h differ
    by more than `limit` (per element, same shape as the result): there the function
    has no single derivative and a central difference cannot be trusted. Their
    difference, (f(x+h) - 2 f(x) + f(x-h)) / h, is O(h f'') where fn is smooth.
    """
    o, i = pair
    result = NumericalResult({}, method, ChunkStats(1, 1), {})
    slot = _Slot(fn, args, i, checked, eps, result, {})
    plus, minus = slot.evaluate(cols, method)
    k = list(checked).index(o)
    y0 = base.detach().reshape(1, -1).to(torch.float64)
    yp, ym = plus[k].detach().to(torch.float64), minus[k].detach().to(torch.float64)
    jump = (yp - 2 * y0 + ym).abs() / eps
    return jump.T > limit


def _max_abs(y: torch.Tensor) -> float:
    return float(y.detach().abs().max()) if y.numel() else 0.0


def _work(slot: _Slot, start: int, stop: int) -> None:
    cols = torch.arange(start, stop, device=slot.args[slot.index].device)
    if slot.result.method == "vmap":
        try:
            _store(slot, start, stop, *slot.evaluate(cols, "vmap"))
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
        _store(slot, j, j + 1, *slot.evaluate(cols[j - start : j - start + 1], "loop"))


def _store(
    slot: _Slot, start: int, stop: int, plus: list[torch.Tensor], minus: list[torch.Tensor]
) -> None:
    """Writes columns [start, stop) of each output's Jacobian: row j of plus/minus is column j."""
    for o, yp, ym in zip(slot.checked, plus, minus):
        central = torch.sub(yp.detach().to(torch.float64), ym.detach().to(torch.float64))
        slot.jac[o][:, start:stop] = central.div_(2 * slot.eps).T
