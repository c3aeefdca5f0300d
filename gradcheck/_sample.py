"""A seeded sample of a Jacobian too large to compare whole: some elements located where the screen could not."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from gradcheck._autograd import vector_jacobian_products
from gradcheck._numerical import directional_differences
from gradcheck._state import RunState

__all__ = ["SAMPLE", "sampled_notes"]

SAMPLE = 16  # output elements x input elements compared per pair: 16 backward passes, 32 evaluations of fn

Pair = tuple[int, int]


def sampled_notes(
    s: RunState, leaves: Sequence[Any], outs: Sequence[torch.Tensor], base: list[torch.Tensor], pairs: list[Pair]
) -> list[str]:
    """Per pair, a note on a SAMPLE x SAMPLE block of its Jacobian compared element by element.

    Columns are random input elements, differenced centrally one at a time; rows are, for each
    column, the output element it moves most (a diagonal Jacobian's nonzero), then random ones,
    from backward passes weighting one output element each. Elements compare as the full check
    compares them (|a - b| <= atol + rtol |b|). The seed is the check's, so a run repeats exactly.
    """
    gen = torch.Generator().manual_seed(s.opts.seed + 1)
    live = [o for o in s.checked if outs[o].requires_grad]
    notes = []
    for o, i in pairs:
        cols = torch.randperm(s.args[i].numel(), generator=gen)[:SAMPLE].sort().values
        numerical = _columns(s, i, o, base, cols)
        if numerical is None:
            continue
        rows = _rows_to_compare(numerical, s.outputs[o].numel(), gen)
        autograd = _rows(s, leaves, outs, live, o, i, rows)[:, cols]
        numerical = numerical[:, rows].T
        bad = (autograd - numerical).abs() > s.opts.atol + s.opts.rtol * numerical.abs()
        shown = f"a {len(rows)} x {len(cols)} block of output {o}, input {i} compared element by element"
        if not bool(bad.any()):
            notes.append(f"sampled: {shown}: all agree (the disagreement lies elsewhere, or is spread thinly)")
            continue
        gap = torch.where(bad, (autograd - numerical).abs(), torch.zeros_like(autograd))
        r, c = divmod(int(gap.argmax()), len(cols))
        where = (f"out{_index(int(rows[r]), s.outputs[o].shape)} in{_index(int(cols[c]), s.args[i].shape)}")
        notes.append(
            f"sampled: {shown}: {int(bad.sum())} disagree; the worst, {where}: autograd "
            f"{float(autograd[r, c]):.6g}, finite differences {float(numerical[r, c]):.6g}"
        )
    return notes


def _rows_to_compare(numerical: torch.Tensor, m: int, gen: torch.Generator) -> torch.Tensor:
    """For each sampled column the output element it moves most, then random others: SAMPLE rows at most."""
    chosen = list(dict.fromkeys(int(r) for r in numerical.abs().nan_to_num(0.0).argmax(dim=1)))
    for r in torch.randperm(m, generator=gen).tolist():
        if len(chosen) >= min(SAMPLE, m):
            break
        if r not in chosen:
            chosen.append(r)
    return torch.tensor(sorted(chosen[:SAMPLE]), dtype=torch.long)


def _rows(
    s: RunState, leaves: Sequence[Any], outs: Sequence[torch.Tensor], live: list[int], o: int, i: int,
    rows: torch.Tensor,
) -> torch.Tensor:
    """Autograd's Jacobian rows `rows` of output o by input i, float64 on the CPU (zeros when o is cut off)."""
    if o not in live:
        return torch.zeros(len(rows), s.args[i].numel(), dtype=torch.float64)
    cotangents = {}
    for q in live:
        weights = torch.zeros(len(rows), outs[q].numel(), dtype=outs[q].dtype, device=s.device)
        if q == o:
            weights[torch.arange(len(rows)), rows.to(s.device)] = 1
        cotangents[q] = weights.reshape(len(rows), *outs[q].shape)
    found, _ = vector_jacobian_products(s.fn, leaves, s.diff, outs, cotangents)
    return found[i].cpu()


def _columns(s: RunState, i: int, o: int, base: list[torch.Tensor], cols: torch.Tensor) -> torch.Tensor | None:
    """Central differences along input elements `cols` of input i: (len(cols), m_o) float64 on the CPU."""
    x = s.num_args[i]
    directions = torch.zeros(len(cols), x.numel(), dtype=x.dtype, device=x.device)
    directions[torch.arange(len(cols)), cols.to(x.device)] = 1
    found = directional_differences(s.num_fn, s.num_args, i, s.checked, base,
                                    directions.reshape(len(cols), *x.shape), eps=s.opts.eps, atol=s.opts.atol)
    return None if found is None else found.jac[(o, i)].cpu()


def _index(flat: int, shape: torch.Size) -> str:
    """`[3, 1]`: a flat index as the element's index in `shape`."""
    parts = []
    for size in reversed(tuple(shape)):
        flat, k = divmod(flat, size)
        parts.append(k)
    return "[" + ", ".join(str(k) for k in reversed(parts)) + "]"
