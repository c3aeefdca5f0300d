"""The autograd Jacobian: batched vector-Jacobian products, a row loop when batching fails."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ._chunks import ChunkStats, plan_chunk, run_chunked
from ._devices import is_out_of_memory
from ._inputs import call_outputs, checked_outputs

__all__ = ["AutogradResult", "autograd_jacobian", "first_line"]

Pair = tuple[int, int]


def first_line(error: BaseException) -> str:
    """The first line of an exception's message, prefixed with its type."""
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}".rstrip(": ")


@dataclass(slots=True)
class AutogradResult:
    """The autograd side: the outputs, and one float64 (m_o, n_i) Jacobian per pair."""

    outputs: tuple[torch.Tensor, ...]
    checked: tuple[int, ...]
    jac: dict[Pair, torch.Tensor]
    method: str
    stats: ChunkStats
    notes: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _Rows:
    """What the row workers share: the graph, and where each output's rows start."""

    outs: list[torch.Tensor]
    live: list[int]
    offsets: list[int]
    leaves: list[torch.Tensor]
    diff: Sequence[int]
    jac: dict[Pair, torch.Tensor]
    batched: bool = True
    reason: str = ""


def autograd_jacobian(
    fn: Callable[..., Any],
    leaves: Sequence[Any],
    diff: Sequence[int],
    *,
    budget_bytes: int,
    device: torch.device,
) -> AutogradResult:
    """Runs `fn` once with grad enabled and builds the Jacobian of every checked output.

    Rows are vector-Jacobian products batched with `is_grads_batched` (vmap over
    the backward), in chunks sized to `budget_bytes`; when the backward cannot
    be batched, one backward per output element instead, with a note saying why.
    """
    with torch.enable_grad():
        outs = call_outputs(fn, leaves)
    checked = checked_outputs(outs)
    jac = {
        (o, i): torch.zeros(outs[o].numel(), leaves[i].numel(), dtype=torch.float64, device=device)
        for o in checked
        for i in diff
    }
    notes = [
        f"output {o} does not require grad (it has no grad_fn): autograd sees no path from "
        "the inputs to it, so its autograd Jacobian is zero. A .detach(), .item(), "
        "torch.no_grad() or a non-differentiable op inside fn cuts the graph."
        for o in checked
        if not outs[o].requires_grad
    ]
    live = [o for o in checked if outs[o].requires_grad]
    sizes = [outs[o].numel() for o in live]
    offsets = [sum(sizes[:k]) for k in range(len(sizes) + 1)]
    total_rows = offsets[-1]
    n_in = sum(x.numel() for x in leaves if isinstance(x, torch.Tensor))
    stats = plan_chunk(
        budget_bytes=budget_bytes,
        item_elements=n_in + total_rows,
        itemsize=max(leaves[i].element_size() for i in diff),
        total=max(1, total_rows),
    )
    rows = _Rows(list(outs), live, offsets, [leaves[i] for i in diff], diff, jac)
    if total_rows:
        run_chunked(total_rows, stats, lambda a, b: _work(rows, a, b), device)
    method = "backward" if total_rows <= 1 else ("vmap" if rows.batched else "loop")
    if not rows.batched:
        notes.append(
            "autograd rows ran one backward per output element because the backward "
            f"could not be batched with vmap ({rows.reason})."
        )
    detached = tuple(y.detach() for y in outs)
    return AutogradResult(detached, checked, jac, method, stats, notes)


def _work(rows: _Rows, start: int, stop: int) -> None:
    if rows.batched and stop - start > 1:
        try:
            _batched_rows(rows, start, stop)
            return
        except Exception as e:  # noqa: BLE001 - the row loop below re-raises real bugs
            if is_out_of_memory(e):
                raise
            rows.batched = False
            rows.reason = first_line(e)
    for r in range(start, stop):
        _single_row(rows, r)


def _batched_rows(rows: _Rows, start: int, stop: int) -> None:
    count = stop - start
    first = rows.outs[rows.live[0]]
    basis = torch.zeros(count, rows.offsets[-1], dtype=first.dtype, device=first.device)
    basis[torch.arange(count), torch.arange(start, stop)] = 1
    grad_outputs = []
    for k, o in enumerate(rows.live):
        block = basis[:, rows.offsets[k] : rows.offsets[k + 1]]
        grad_outputs.append(block.to(rows.outs[o].dtype).reshape((count, *rows.outs[o].shape)))
    with warnings.catch_warnings():
        # vmap's notice that an op has no batching rule is about speed, not correctness.
        warnings.filterwarnings("ignore", message=".*performance drop.*")
        grads = torch.autograd.grad(
            [rows.outs[o] for o in rows.live],
            rows.leaves,
            grad_outputs=grad_outputs,
            retain_graph=True,
            allow_unused=True,
            is_grads_batched=True,
        )
    for i, g in zip(rows.diff, grads):
        if g is not None:
            _scatter(rows, i, start, stop, g.reshape(count, -1))


def _single_row(rows: _Rows, r: int) -> None:
    k = max(j for j in range(len(rows.live)) if rows.offsets[j] <= r)
    out = rows.outs[rows.live[k]]
    onehot = torch.zeros(out.numel(), dtype=out.dtype, device=out.device)
    onehot[r - rows.offsets[k]] = 1
    grads = torch.autograd.grad(
        out, rows.leaves, grad_outputs=onehot.reshape(out.shape), retain_graph=True, allow_unused=True
    )
    for i, g in zip(rows.diff, grads):
        if g is not None:
            _scatter(rows, i, r, r + 1, g.reshape(1, -1))


def _scatter(rows: _Rows, i: int, start: int, stop: int, block: torch.Tensor) -> None:
    """Writes global rows [start, stop) of input i's gradients into each output's Jacobian."""
    for k, o in enumerate(rows.live):
        lo, hi = max(start, rows.offsets[k]), min(stop, rows.offsets[k + 1])
        if lo < hi:
            target = rows.jac[(o, i)]
            target[lo - rows.offsets[k] : hi - rows.offsets[k]] = block[lo - start : hi - start].to(
                torch.float64
            )
