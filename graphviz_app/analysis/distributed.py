"""Plain records of a distributed step's memory: one rank's figures, its collectives, a table of ranks."""

from __future__ import annotations

from dataclasses import dataclass

from ..model import human_bytes
from ..model.ranks import CollectiveEvent, FsdpUnit

__all__ = ["CollectiveEvent", "FsdpUnit", "RankMemory", "RankTable", "rank_table", "format_ranks", "WhatIf",
           "format_what_ifs", "Verified", "format_verified"]


@dataclass(frozen=True, slots=True)
class RankMemory:
    """One rank's step: its peak and what exists anyway, in bytes.

    `peak_bytes` is the most the step itself held at once (activations,
    unsharded parameters, gradients, collective buffers, temporaries), counted
    by the same counter as a single process. The rest exist before and after the
    step: the rank's local parameter shards, buffers, optimizer state, inputs and
    DDP's gradient buckets. `grads_bytes` is the local gradients after backward
    (inside the peak). `total_bytes` is what the rank needs at its peak.
    `tracker_bytes` is the peak PyTorch's `tracker` (FSDPMemTracker, MemTracker)
    saw on the same step, when it followed it.
    """

    rank: int
    world_size: int
    strategy: str
    peak_bytes: int
    params_bytes: int
    grads_bytes: int
    optimizer_bytes: int
    buffers_bytes: int
    inputs_bytes: int
    buckets_bytes: int = 0
    collectives: tuple[CollectiveEvent, ...] = ()
    notes: tuple[str, ...] = ()
    tracker: str | None = None
    tracker_bytes: int | None = None

    @property
    def static_bytes(self) -> int:
        """What exists before and after the step: parameters, buffers, optimizer state, inputs, buckets."""
        return self.params_bytes + self.optimizer_bytes + self.buffers_bytes + self.inputs_bytes + self.buckets_bytes

    @property
    def total_bytes(self) -> int:
        """The rank's memory at the step's peak: the step's peak plus what exists anyway."""
        return self.peak_bytes + self.static_bytes

    def to_dict(self) -> dict[str, object]:
        """JSON-ready: every figure, `predicted_peak_bytes` and `total_bytes` named as the CLI prints them."""
        return {
            "rank": self.rank, "world_size": self.world_size, "strategy": self.strategy,
            "predicted_peak_bytes": self.peak_bytes, "params_bytes": self.params_bytes,
            "grads_bytes": self.grads_bytes, "optimizer_bytes": self.optimizer_bytes,
            "buffers_bytes": self.buffers_bytes, "inputs_bytes": self.inputs_bytes,
            "buckets_bytes": self.buckets_bytes, "total_bytes": self.total_bytes,
            "collectives": [{"op": c.op, "bytes": c.bytes, "phase": c.phase,
                             **({"node": c.node} if c.node is not None else {})} for c in self.collectives],
            "notes": list(self.notes),
            **({"tracker": self.tracker, "tracker_bytes": self.tracker_bytes} if self.tracker else {}),
        }


@dataclass(frozen=True, slots=True)
class RankTable:
    """Every rank's figures of one step, in rank order, and the rank whose total is the largest."""

    ranks: tuple[RankMemory, ...]
    peak_rank: int

    def __str__(self) -> str:
        return format_ranks(self.ranks, peak_rank=self.peak_rank)


def rank_table(ranks: list[RankMemory] | tuple[RankMemory, ...]) -> RankTable:
    """The table of `ranks` (any order), the peak rank named (the lowest rank among equals).

    >>> a = RankMemory(0, 2, "FSDP2", 100, 10, 10, 20, 0, 5)
    >>> b = RankMemory(1, 2, "FSDP2", 120, 10, 10, 20, 0, 5)
    >>> rank_table([b, a]).peak_rank
    1
    """
    if not ranks:
        raise ValueError("a table of ranks needs at least one rank's figures")
    ordered = tuple(sorted(ranks, key=lambda r: r.rank))
    peak = max(ordered, key=lambda r: (r.total_bytes, -r.rank))
    return RankTable(ordered, peak.rank)


def format_ranks(ranks: tuple[RankMemory, ...] | list[RankMemory], *, peak_rank: int | None = None) -> str:
    """A text table, one row per rank (or per world size): peak, parameters, gradients, optimizer state, total.

    >>> print(format_ranks([RankMemory(0, 8, "FSDP2", 2048, 1024, 1024, 2048, 0, 0)]))
    world  rank  strategy  step peak  params   grads    optimizer  total
    8      0     FSDP2     2.0 KiB    1.0 KiB  1.0 KiB  2.0 KiB    5.0 KiB
    """
    header = ("world", "rank", "strategy", "step peak", "params", "grads", "optimizer", "total")
    rows = [header]
    for r in ranks:
        mark = " <- peak" if peak_rank is not None and r.rank == peak_rank and len(ranks) > 1 else ""
        rows.append((str(r.world_size), str(r.rank), r.strategy, human_bytes(r.peak_bytes),
                     human_bytes(r.params_bytes), human_bytes(r.grads_bytes), human_bytes(r.optimizer_bytes),
                     human_bytes(r.total_bytes) + mark))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header) - 1)]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)) + "  " + row[-1]
                     for row in rows).rstrip()


@dataclass(frozen=True, slots=True)
class WhatIf:
    """One setup of a side-by-side comparison: its label and its rank's figures, or why it has none."""

    label: str
    memory: RankMemory | None
    error: str | None = None


def format_what_ifs(rows: tuple[WhatIf, ...] | list[WhatIf]) -> str:
    """A text table, one row per setup: strategy, step peak, parameters, gradients, optimizer state, total.

    >>> print(format_what_ifs([WhatIf("a", RankMemory(0, 8, "FSDP2", 2048, 1024, 1024, 2048, 0, 0)),
    ...                        WhatIf("b", None, "cannot run here")]))
    setup  strategy  step peak  params   grads    optimizer  total
    a      FSDP2     2.0 KiB    1.0 KiB  1.0 KiB  2.0 KiB    5.0 KiB
    b      -         cannot run here
    """
    header = ("setup", "strategy", "step peak", "params", "grads", "optimizer", "total")
    rows_text: list[tuple[str, ...]] = [header]
    for row in rows:
        m = row.memory
        if m is None:
            rows_text.append((row.label, "-", row.error or "no figures"))
            continue
        rows_text.append((row.label, m.strategy, human_bytes(m.peak_bytes), human_bytes(m.params_bytes),
                          human_bytes(m.grads_bytes), human_bytes(m.optimizer_bytes), human_bytes(m.total_bytes)))
    widths = [max(len(r[i]) for r in rows_text if len(r) > i + 1) for i in range(len(header) - 1)]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(r[:-1], widths, strict=False)) + "  " + r[-1]
                     for r in rows_text)


@dataclass(frozen=True, slots=True)
class Verified:
    """A forecast row checked: how (`method`: real gloo ranks or a fake cluster, and the tracker), the tracker's
    total for rank 0 (`tracker_bytes`, None when it gave none) and, on real ranks, our count there (`measured_bytes`).
    """

    method: str
    tracker_bytes: int | None
    measured_bytes: int | None = None


def format_verified(rows: list[tuple[str, int | None, Verified | None, str | None]]) -> str:
    """A text table of forecast rows beside their check: (label, predicted total, the check, or why none).

    >>> print(format_verified([("fsdp", 2048, Verified("fake cluster of 8, FSDPMemTracker", 2048), None),
    ...                        ("ddp", None, None, "DDP cannot run on fake tensors")]))
    setup  predicted total  verified total  difference  how
    fsdp   2.0 KiB          2.0 KiB         +0.00%      fake cluster of 8, FSDPMemTracker
    ddp    -                -               -           DDP cannot run on fake tensors
    """
    table: list[tuple[str, ...]] = [("setup", "predicted total", "verified total", "difference", "how")]
    for label, predicted, check, error in rows:
        tracker = check.tracker_bytes if check is not None else None
        diff = f"{(predicted - tracker) / tracker:+.2%}" if predicted is not None and tracker else "-"
        how = check.method if check is not None else (error or "-")
        if check is not None and check.measured_bytes is not None:
            how += f" (our count on those ranks: {human_bytes(check.measured_bytes)})"
        table.append((label, human_bytes(predicted) if predicted is not None else "-",
                      human_bytes(tracker) if tracker is not None else "-", diff, how))
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]) - 1)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)) + "  " + r[-1]
                     for r in table)
