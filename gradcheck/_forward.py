"""The forward-mode Jacobian: vmapped jvp over one-hot tangents, else dual numbers column by column."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.autograd.forward_ad as fwad
from torch.func import jvp, vmap

from gradcheck._autograd import first_line
from gradcheck._chunks import plan_chunk, run_chunked
from gradcheck._devices import is_out_of_memory
from gradcheck._inputs import call_outputs, overlapping
from gradcheck.errors import InputError

__all__ = ["ForwardResult", "forward_jacobian", "JVP", "DUAL"]

Pair = tuple[int, int]
JVP, DUAL = "vmap(jvp)", "dual numbers"


@dataclass(slots=True)
class ForwardResult:
    """One float64 (m_o, n_i) Jacobian per pair, its columns made by forward mode."""

    jac: dict[Pair, torch.Tensor]
    method: str = JVP
    notes: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _Columns:
    fn: Callable[..., Any]
    args: Sequence[Any]
    index: int
    checked: Sequence[int]
    result: ForwardResult

    def outputs(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        call = list(self.args)
        call[self.index] = x
        outs = call_outputs(self.fn, call)
        return tuple(outs[o] for o in self.checked)


def forward_jacobian(
    fn: Callable[..., Any],
    args: Sequence[Any],
    diff: Sequence[int],
    checked: Sequence[int],
    *,
    budget_bytes: int,
    device: torch.device,
) -> ForwardResult:
    """Jacobian columns J e_j by forward-mode AD, for every differentiated input element j.

    Through `torch.func.jvp` vmapped over a chunk of one-hot tangents; when fn
    cannot be transformed (an autograd.Function without setup_context), through
    `torch.autograd.forward_ad` dual numbers, one column at a time.

    Args:
        args: detached inputs in fn's own dtype and layout.

    Raises:
        InputError: when fn has no forward-mode derivative at all (an
            autograd.Function without a jvp staticmethod).
    """
    result = ForwardResult({})
    outs = call_outputs(fn, args)
    sizes = {o: outs[o].numel() for o in checked}
    args = list(args)
    for i in diff:
        if overlapping(args[i]):
            # Neither dual numbers nor jvp take a tangent for a tensor whose elements share memory.
            args[i] = args[i].contiguous()
            result.notes.append(
                f"input {i} is expanded (its elements share memory), which forward mode cannot take: "
                "forward mode ran on a contiguous copy of it (reverse mode keeps its layout)."
            )
        x = args[i].detach()
        stats = plan_chunk(
            budget_bytes=budget_bytes,
            item_elements=x.numel() + sum(sizes.values()),
            itemsize=x.element_size(),
            total=max(1, x.numel()),
        )
        for o in checked:
            result.jac[(o, i)] = torch.empty(sizes[o], x.numel(), dtype=torch.float64, device=device)
        run_chunked(x.numel(), stats, functools.partial(_work, _Columns(fn, args, i, checked, result)), device)
    return result


def _work(cols: _Columns, start: int, stop: int) -> None:
    x = cols.args[cols.index].detach()
    count = stop - start
    basis = torch.zeros(count, x.numel(), dtype=x.dtype, device=x.device)
    basis[torch.arange(count), torch.arange(start, stop)] = 1
    basis = basis.reshape(count, *x.shape)
    if cols.result.method == JVP:
        try:
            tangents = vmap(lambda t: jvp(cols.outputs, (x,), (t,))[1])(basis)
        except Exception as e:  # noqa: BLE001 - dual numbers below re-raise what is real
            if is_out_of_memory(e):
                raise
            cols.result.method = DUAL
            cols.result.notes.append(
                f"forward mode ran one column at a time with dual numbers, as torch.func.jvp could not "
                f"take fn ({first_line(e)})."
            )
        else:
            _store(cols, start, stop, [t.reshape(count, -1) for t in tangents])
            return
    _store(cols, start, stop, [torch.stack(c) for c in zip(*(_dual_column(cols, b) for b in basis), strict=True)])


def _dual_column(cols: _Columns, tangent: torch.Tensor) -> list[torch.Tensor]:
    x = cols.args[cols.index].detach()
    try:
        with fwad.dual_level():
            outs = cols.outputs(fwad.make_dual(x, tangent.reshape(x.shape)))
            columns = []
            for y in outs:
                t = fwad.unpack_dual(y).tangent
                columns.append(torch.zeros(y.numel(), dtype=y.dtype, device=y.device) if t is None else t.reshape(-1))
            return columns
    except (NotImplementedError, RuntimeError) as e:
        if is_out_of_memory(e) or "forward" not in str(e).lower() and "jvp" not in str(e).lower():
            raise
        raise InputError(
            f"modes asks for forward mode, but fn has no forward-mode derivative ({first_line(e)}). "
            "Give its autograd.Function a jvp staticmethod (with setup_context, for torch.func), "
            "or check modes=('rev',)."
        ) from None


def _store(cols: _Columns, start: int, stop: int, columns: list[torch.Tensor]) -> None:
    for o, block in zip(cols.checked, columns, strict=True):
        cols.result.jac[(o, cols.index)][:, start:stop] = block.detach().to(torch.float64).T
