"""The autograd Jacobian: vmapped vector-Jacobian products, with two slower fallbacks."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.func import vjp, vmap

from gradcheck._chunks import ChunkStats, plan_chunk, run_chunked
from gradcheck._devices import is_out_of_memory
from gradcheck._inputs import call_outputs, checked_outputs

__all__ = [
    "AutogradResult",
    "autograd_jacobian",
    "vector_jacobian_products",
    "no_grad_notes",
    "first_line",
    "oldstyle_function",
]

Pair = tuple[int, int]

# The ways rows are computed, fastest first; each falls back to the next on failure.
FUNCTORCH, BATCHED, LOOP = "vmap(vjp)", "batched backward", "loop"


def first_line(error: BaseException) -> str:
    """The first line of an exception's message, prefixed with its type."""
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}".rstrip(": ")


def oldstyle_function(error: BaseException) -> bool:
    """Whether `error` is torch.func refusing an autograd.Function that has no setup_context."""
    return "setup_context" in str(error) and "autograd.Function" in str(error)


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

    fn: Callable[..., Any]
    leaves: Sequence[Any]
    outs: list[torch.Tensor]
    live: list[int]
    offsets: list[int]
    diff: Sequence[int]
    jac: dict[Pair, torch.Tensor]
    method: str = FUNCTORCH
    vjp_fn: Callable[..., Any] | None = None
    reasons: list[str] = field(default_factory=list)


def autograd_jacobian(
    fn: Callable[..., Any],
    leaves: Sequence[Any],
    diff: Sequence[int],
    *,
    budget_bytes: int,
    device: torch.device,
    found_complex: list[int] | None = None,
) -> AutogradResult:
    """Runs `fn` with grad enabled and builds the Jacobian of every checked output.

    Rows are vector-Jacobian products for a chunk of one-hot vectors at a time,
    sized to `budget_bytes`: through `torch.func.vjp` + `vmap` when fn allows it,
    else a batched backward over the recorded graph (`is_grads_batched`), else
    one backward per output element, with a note saying why. The indices of
    complex outputs (checked as real views) are appended to `found_complex`.
    """
    with torch.enable_grad():
        outs = call_outputs(fn, leaves, found_complex=found_complex)
    checked = checked_outputs(outs)
    jac: dict[Pair, torch.Tensor] = {}
    notes = no_grad_notes(outs, checked)
    live = [o for o in checked if outs[o].requires_grad]
    sizes = [outs[o].numel() for o in live]
    offsets = [sum(sizes[:k]) for k in range(len(sizes) + 1)]
    n_in = sum(x.numel() for x in leaves if isinstance(x, torch.Tensor))
    stats = plan_chunk(
        budget_bytes=budget_bytes,
        item_elements=n_in + offsets[-1],
        itemsize=max(leaves[i].element_size() for i in diff),
        total=max(1, offsets[-1]),
        # A row is a one-hot cotangent and its gradient, with fewer temporaries than an
        # evaluation: one chunk holds the rows of a 1000 x 1000 Jacobian, written in place.
        working_factor=2,
    )
    rows = _Rows(fn, leaves, list(outs), live, offsets, diff, jac)
    if offsets[-1] == 1:
        rows.method = LOOP
    if offsets[-1]:
        run_chunked(offsets[-1], stats, lambda a, b: _work(rows, a, b), device)
    if rows.reasons and rows.method == LOOP:
        notes.append(
            "autograd rows ran one backward per output element, as the backward could not be "
            f"batched with vmap ({'; '.join(rows.reasons)})."
        )
    for o in checked:  # rows never written (no path to the input) are zero
        for i in diff:
            if (o, i) not in jac:
                jac[(o, i)] = torch.zeros(
                    outs[o].numel(), leaves[i].numel(), dtype=torch.float64, device=device
                )
    method = "backward" if offsets[-1] <= 1 else rows.method
    return AutogradResult(tuple(y.detach() for y in outs), checked, jac, method, stats, notes)


def no_grad_notes(outs: Sequence[torch.Tensor], checked: Sequence[int]) -> list[str]:
    """A note per checked output that autograd cannot reach (it has no grad_fn)."""
    return [
        f"output {o} does not require grad (it has no grad_fn): autograd sees no path from "
        "the inputs to it, so its autograd Jacobian is zero. A .detach(), .item(), "
        "torch.no_grad() or a non-differentiable op inside fn cuts the graph."
        for o in checked
        if not outs[o].requires_grad
    ]


def _work(rows: _Rows, start: int, stop: int) -> None:
    """Fills rows [start, stop) of the Jacobians with the one-hot rows' gradients."""
    grads = _gradients(rows, _basis(rows, start, stop))
    for i, g in zip(rows.diff, grads, strict=True):
        _scatter(rows, i, start, stop, g)


def _gradients(rows: _Rows, cotangents: list[torch.Tensor]) -> list[torch.Tensor | None]:
    """Per differentiated input, the (count, n_i) gradients of a batch of cotangents.

    `cotangents` holds one (count, *shape) tensor per live output. The fastest way
    that works is used, dropping to the next slower one on any real failure; None
    stands for an input that no live output reaches.
    """
    count = cotangents[0].shape[0]
    for method, worker in ((FUNCTORCH, _functorch_rows), (BATCHED, _batched_rows)):
        if rows.method != method:
            continue
        try:
            return worker(rows, cotangents)
        except Exception as e:  # noqa: BLE001 - the loop at the end re-raises real bugs
            if is_out_of_memory(e):
                raise
            rows.reasons.append(f"{method}: {first_line(e)}")
            rows.method = BATCHED if method == FUNCTORCH else LOOP
    singles = [_single_row(rows, [c[r] for c in cotangents]) for r in range(count)]
    return [
        None if all(g[k] is None for g in singles) else torch.cat([_row_or_zeros(rows, i, g[k]) for g in singles])
        for k, i in enumerate(rows.diff)
    ]


def vector_jacobian_products(
    fn: Callable[..., Any],
    leaves: Sequence[Any],
    diff: Sequence[int],
    outs: Sequence[torch.Tensor],
    cotangents: dict[int, torch.Tensor],
) -> tuple[dict[int, torch.Tensor], str]:
    """The gradients of a batch of cotangents, by the fastest way fn allows.

    Args:
        outs: fn's outputs at `leaves`, recorded with grad enabled.
        cotangents: per output that requires grad, a (count, *shape) batch of weights.

    Returns:
        Per differentiated input, the float64 (count, n_i) gradients (zeros where no
        output reaches it), and the method used.
    """
    live = sorted(cotangents)
    rows = _Rows(fn, leaves, list(outs), live, [], diff, {})
    grads = _gradients(rows, [cotangents[o] for o in live])
    count = cotangents[live[0]].shape[0]
    result = {
        i: torch.zeros(count, leaves[i].numel(), dtype=torch.float64, device=leaves[i].device)
        if g is None
        else g.detach().reshape(count, -1).to(torch.float64)
        for i, g in zip(diff, grads, strict=True)
    }
    return result, rows.method


def _basis(rows: _Rows, start: int, stop: int) -> list[torch.Tensor]:
    """One-hot cotangents for global rows [start, stop), one tensor per live output."""
    count = stop - start
    first = rows.outs[rows.live[0]]
    basis = torch.zeros(count, rows.offsets[-1], dtype=first.dtype, device=first.device)
    basis[:, start:stop].diagonal().fill_(1)
    return [
        basis[:, rows.offsets[k] : rows.offsets[k + 1]]
        .to(rows.outs[o].dtype)
        .reshape((count, *rows.outs[o].shape))
        for k, o in enumerate(rows.live)
    ]


def _functorch_rows(rows: _Rows, cotangents: list[torch.Tensor]) -> list[torch.Tensor | None]:
    if rows.vjp_fn is None:
        live, args = rows.live, list(rows.leaves)

        def pure(*xs: torch.Tensor) -> tuple[torch.Tensor, ...]:
            call = list(args)
            for i, x in zip(rows.diff, xs, strict=True):
                call[i] = x
            outs = call_outputs(rows.fn, call)
            return tuple(outs[o] for o in live)

        primals = [args[i].detach() for i in rows.diff]
        rows.vjp_fn = vjp(pure, *primals)[1]
    count = cotangents[0].shape[0]
    grads = vmap(rows.vjp_fn)(tuple(cotangents))
    return [g.reshape(count, -1) for g in grads]


def _batched_rows(rows: _Rows, cotangents: list[torch.Tensor]) -> list[torch.Tensor | None]:
    count = cotangents[0].shape[0]
    with warnings.catch_warnings():
        # vmap's notice that an op has no batching rule is about speed, not correctness.
        warnings.filterwarnings("ignore", message=".*performance drop.*")
        grads = torch.autograd.grad(
            [rows.outs[o] for o in rows.live],
            [rows.leaves[i] for i in rows.diff],
            grad_outputs=cotangents,
            retain_graph=True,
            allow_unused=True,
            is_grads_batched=True,
        )
    return [None if g is None else g.reshape(count, -1) for g in grads]


def _single_row(rows: _Rows, weights: list[torch.Tensor]) -> list[torch.Tensor | None]:
    """One backward for one cotangent (a tensor per live output), skipping outputs weighted zero."""
    used = [(rows.outs[o], w) for o, w in zip(rows.live, weights, strict=True) if bool(w.any())]
    if not used:
        return [None for _ in rows.diff]
    grads = torch.autograd.grad(
        [y for y, _ in used],
        [rows.leaves[i] for i in rows.diff],
        grad_outputs=[w for _, w in used],
        retain_graph=True,
        allow_unused=True,
    )
    return [None if g is None else g.reshape(1, -1) for g in grads]


def _row_or_zeros(rows: _Rows, i: int, g: torch.Tensor | None) -> torch.Tensor:
    leaf = rows.leaves[i]
    return torch.zeros(1, leaf.numel(), dtype=leaf.dtype, device=leaf.device) if g is None else g


def _scatter(rows: _Rows, i: int, start: int, stop: int, block: torch.Tensor | None) -> None:
    """Writes global rows [start, stop) of input i's gradients into each output's Jacobian.

    Every row is written once: with the block's values, or zeros where autograd found
    no path (`block` None). A block holding all of an output's rows becomes its
    Jacobian without a copy.
    """
    n_in = rows.leaves[i].numel()
    for k, o in enumerate(rows.live):
        first, end = rows.offsets[k], rows.offsets[k + 1]
        lo, hi = max(start, first), min(stop, end)
        if lo >= hi:
            continue
        part = None if block is None else block[lo - start : hi - start].detach().to(torch.float64)
        if part is not None and (lo, hi) == (first, end):
            rows.jac[(o, i)] = part
            continue
        if (o, i) not in rows.jac:
            device = rows.leaves[i].device
            rows.jac[(o, i)] = torch.empty(end - first, n_in, dtype=torch.float64, device=device)
        target = rows.jac[(o, i)][lo - first : hi - first]
        if part is None:
            target.zero_()
        else:
            target.copy_(part)
