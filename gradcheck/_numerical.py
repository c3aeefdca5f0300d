"""Central finite differences: all perturbed inputs batched through vmap, or a loop."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.func import vmap

from gradcheck._autograd import first_line, oldstyle_function
from gradcheck._chunks import ChunkStats, plan_chunk, run_chunked
from gradcheck._devices import is_out_of_memory
from gradcheck._inputs import call_outputs

__all__ = ["NumericalResult", "numerical_jacobian", "directional_differences", "evaluate_steps", "rounding_floor"]

Pair = tuple[int, int]
VMAP, LOOP = "vmap", "loop"


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
    verified: bool = False  # vmap's values were checked against a plain call


@dataclass(slots=True)
class _Slot:
    """One differentiated input being perturbed, and where its columns go."""

    fn: Callable[..., Any]
    args: Sequence[Any]
    index: int
    checked: Sequence[int]
    eps: float
    result: NumericalResult
    jac: dict[int, torch.Tensor]  # per output: the (m_o, n_i) differences, filled column block by block
    base: Sequence[torch.Tensor] = ()
    atol: float = 0.0

    def call(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The checked outputs of fn with this slot's input replaced by `x`."""
        call = list(self.args)
        call[self.index] = x
        outs = call_outputs(self.fn, call)
        return tuple(outs[o] for o in self.checked)

    def evaluate(
        self, cols: torch.Tensor, method: str, steps: Sequence[float] = (1.0, -1.0), plain: bool = False
    ) -> list[list[torch.Tensor]]:
        """fn at x + s eps e_j for each step multiple s and each j in `cols`.

        Returns one list per step, of one tensor per checked output with a row per
        column j, flattened over the output's elements. With `plain`, one more entry
        at the end holds fn at x itself (one row), evaluated the same way.
        """
        x = self.args[self.index]
        count = cols.numel()
        rows = len(steps) * count + int(plain)
        batch = x.reshape(1, -1).expand(rows, -1).clone()
        first, last = int(cols[0]), int(cols[-1]) + 1
        contiguous = last - first == count  # a range of columns: each step is a diagonal
        at = None if contiguous else torch.arange(count, device=x.device)
        for k, s in enumerate(steps):
            if at is None:
                batch[k * count : (k + 1) * count, first:last].diagonal().add_(s * self.eps)
            else:
                batch[at + k * count, cols] += s * self.eps
        outs = self.run(batch.reshape(rows, *x.shape), method)
        parts = [[y[k * count : (k + 1) * count] for y in outs] for k in range(len(steps))]
        if plain:
            parts.append([y[-1:] for y in outs])
        return parts

    def run(self, batch: torch.Tensor, method: str) -> list[torch.Tensor]:
        """fn at each row of `batch` (this slot's input replaced), per checked output one (rows, m_o) tensor."""
        rows = batch.shape[0]
        if method == VMAP:
            return [y.reshape(rows, -1) for y in vmap(self.call)(batch)]
        each = [self.call(b) for b in batch]
        return [torch.stack([e[k].reshape(-1) for e in each]) for k in range(len(self.checked))]


def numerical_jacobian(
    fn: Callable[..., Any],
    args: Sequence[Any],
    diff: Sequence[int],
    checked: Sequence[int],
    base: Sequence[torch.Tensor],
    *,
    eps: float,
    atol: float = 1e-5,
    budget_bytes: int,
    device: torch.device,
) -> NumericalResult:
    """Central differences (f(x + eps e_j) - f(x - eps e_j)) / 2 eps for every input element.

    The first batched chunk also evaluates fn at x itself under vmap; when that
    differs from `base` (a wrong custom vmap rule), every column runs in a loop.

    Args:
        base: fn's checked outputs at the unperturbed `args` (sizes, rounding floors,
            and the plain call that vmap's values are checked against).
        atol: the check's absolute tolerance; vmap may differ from the plain call by
            no more than would move a difference quotient by a tenth of it.
    """
    floors = {o: rounding_floor(y.dtype, _max_abs(y), eps) for o, y in zip(checked, base, strict=True)}
    n_in = sum(x.numel() for x in args if isinstance(x, torch.Tensor))
    stats = plan_chunk(
        budget_bytes=budget_bytes,
        item_elements=2 * (n_in + sum(y.numel() for y in base)),
        itemsize=max(args[i].element_size() for i in diff),
        total=max(args[i].numel() for i in diff),
    )
    result = NumericalResult({}, VMAP, stats, floors)
    for i in diff:
        # Each chunk's differences go straight into their columns of the (m, n) Jacobian,
        # divided by 2 eps in place at the end: no (n, m) buffer and no transposing pass.
        # Timed alone for a 1000 x 1000 pair, the buffer and the pass took 4x the direct store.
        jac = {
            o: torch.empty(y.numel(), args[i].numel(), dtype=torch.float64, device=device)
            for o, y in zip(checked, base, strict=True)
        }
        slot = _Slot(fn, args, i, checked, eps, result, jac, base, atol)
        run_chunked(args[i].numel(), stats, functools.partial(_work, slot), device)
        result.jac.update({(o, i): t.div_(2 * eps) for o, t in jac.items()})
    return result


def directional_differences(
    fn: Callable[..., Any],
    args: Sequence[Any],
    index: int,
    checked: Sequence[int],
    base: Sequence[torch.Tensor],
    directions: torch.Tensor,
    *,
    eps: float,
    atol: float,
) -> NumericalResult | None:
    """Central differences of fn along whole directions of input `index`: all its elements at once.

    Row b of `directions` (shaped (k, *input shape)) gives, per checked output o, row b
    of the float64 (k, m_o) result `jac[(o, index)]`: (f(x + eps d_b) - f(x - eps d_b)) / 2 eps.
    The 2k evaluations are batched through vmap with fn at x itself beside them,
    or run in a loop when fn cannot be vmapped. None when vmap's value at x
    differs from `base` (a wrong vmap rule): then these differences cannot be trusted.
    """
    count = directions.shape[0]
    x = args[index]
    step = directions.to(x.dtype) * eps
    batch = torch.cat([x.unsqueeze(0) + step, x.unsqueeze(0) - step, x.unsqueeze(0)])
    result = NumericalResult({}, VMAP, ChunkStats(2 * count + 1, 0), {})
    slot = _Slot(fn, args, index, checked, eps, result, {}, base, atol)
    try:
        outs = slot.run(batch, VMAP)
    except Exception as e:  # noqa: BLE001 - the loop below re-raises real bugs
        if is_out_of_memory(e):
            raise
        result.method = LOOP
        result.notes.append(_no_vmap_note(e))
        outs = slot.run(batch[:-1], LOOP)  # fn at x itself is for checking vmap only
    else:
        if not _same_as_plain(slot, [y[-1:] for y in outs]):
            return None
    for o, y in zip(checked, outs, strict=True):
        y64 = y.detach().to(torch.float64)
        result.jac[(o, index)] = (y64[:count] - y64[count : 2 * count]).div_(2 * eps)
    return result


def evaluate_steps(
    fn: Callable[..., Any],
    args: Sequence[Any],
    index: int,
    checked: Sequence[int],
    cols: torch.Tensor,
    *,
    eps: float,
    method: str,
    steps: Sequence[float],
) -> list[list[torch.Tensor]]:
    """fn's checked outputs at x + s eps e_j for each step multiple s and input element j in `cols`.

    One list per step, of one float64 (len(cols), m_o) tensor per checked output.
    """
    result = NumericalResult({}, method, ChunkStats(1, 1), {})
    slot = _Slot(fn, args, index, checked, eps, result, {})
    return [[y.detach().to(torch.float64) for y in step] for step in slot.evaluate(cols, method, steps)]


def _max_abs(y: torch.Tensor) -> float:
    return float(y.detach().abs().max()) if y.numel() else 0.0


def _work(slot: _Slot, start: int, stop: int) -> None:
    cols = torch.arange(start, stop, device=slot.args[slot.index].device)
    result = slot.result
    if result.method == VMAP:
        try:
            parts = slot.evaluate(cols, VMAP, plain=not result.verified)
        except Exception as e:  # noqa: BLE001 - the loop below re-raises real bugs
            if is_out_of_memory(e):
                raise
            result.method = LOOP
            result.notes.append(_no_vmap_note(e))
        else:
            if result.verified or _same_as_plain(slot, parts[-1]):
                result.verified = True
                _store(slot, start, stop, parts[0], parts[1])
                return
            result.method = LOOP
    _store(slot, start, stop, *slot.evaluate(cols, LOOP))


def _no_vmap_note(error: Exception) -> str:
    if oldstyle_function(error):
        return (
            "fn uses an autograd.Function without setup_context, which vmap cannot batch: finite "
            "differences ran one element at a time (same numbers, slower)."
        )
    return (
        "finite differences ran one element at a time because fn cannot be "
        f"vmapped ({first_line(error)}). In-place ops on inputs, .item(), data-dependent "
        "if/while and autograd.Functions without setup_context + "
        "generate_vmap_rule=True prevent batching; the results are the same, only slower."
    )


def _same_as_plain(slot: _Slot, batched: list[torch.Tensor]) -> bool:
    """Whether fn under vmap gives the plain call's values at the unperturbed input.

    A wrong custom vmap rule (or an op batched differently) gives other values; then
    finite differences through vmap cannot be trusted, and a note says so.
    """
    worst = 0.0
    for got, want in zip(batched, slot.base, strict=True):
        want64 = want.detach().reshape(1, -1).to(torch.float64)
        diff = (got.detach().to(torch.float64) - want64).abs()
        both_nan = got.detach().isnan() & want64.isnan()
        diff = diff.masked_fill(both_nan, 0.0).nan_to_num(nan=float("inf"))
        roundoff = torch.finfo(want.dtype).eps if want.is_floating_point() else 0.0
        scale = float(want64.abs().nan_to_num(0.0, 0.0, 0.0).max()) if want64.numel() else 0.0
        limit = slot.atol * slot.eps / 10 + 1e3 * roundoff * scale
        if diff.numel() and float(diff.max()) > limit:
            worst = max(worst, float(diff.max()))
    if worst == 0.0:
        return True
    slot.result.notes.append(
        f"fn gives different values under vmap than when called plainly (by up to {worst:.3g} at the "
        "unperturbed input): its batching (a custom vmap rule, or generate_vmap_rule on a forward "
        "that is not batch-safe) is wrong, so finite differences ran one element at a time "
        "without vmap. Anything run under torch.func.vmap with this function gets wrong values."
    )
    return False


def _store(slot: _Slot, start: int, stop: int, plus: list[torch.Tensor], minus: list[torch.Tensor]) -> None:
    """Writes columns [start, stop) of each output's differences: column j is f(x + eps e_j) - f(x - eps e_j)."""
    for o, yp, ym in zip(slot.checked, plus, minus, strict=True):
        torch.sub(yp.detach().to(torch.float64).T, ym.detach().to(torch.float64).T, out=slot.jac[o][:, start:stop])
