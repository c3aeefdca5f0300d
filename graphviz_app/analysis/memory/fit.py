"""Will a step fit: its peak plus what exists anyway (parameters, buffers, inputs, optimizer state)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...model import human_bytes

__all__ = ["OPTIMIZERS", "StaticBytes", "Fit", "fit", "parse_bytes", "largest_batch", "NOT_MODELLED"]

# Optimizer -> state tensors kept per trainable parameter (each the parameter's size and dtype).
OPTIMIZERS = {"none": 0, "sgd": 1, "adam": 2}
NOT_MODELLED = (
    "allocator rounding and fragmentation (CUDA rounds every block up to 512 bytes and caches freed blocks), "
    "library workspaces (cuBLAS, cuDNN), the optimizer step's own temporaries (foreach updates), gradients kept "
    "from an earlier step (zero_grad(set_to_none=False)), the CUDA context; in the replay of a graph that does not "
    "record them (the timeline's notes say which; measure and forecast record both, trace_model the first): "
    "temporaries inside one backward op, the recompute of checkpointed blocks"
)

_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1024, "m": 1000**2, "mb": 1000**2, "mib": 1024**2,
          "g": 1000**3, "gb": 1000**3, "gib": 1024**3, "t": 1000**4, "tb": 1000**4, "tib": 1024**4}


def parse_bytes(text: str) -> int:
    """A size as people write it: `16GiB` (binary), `16GB` (decimal), `512MiB`, `1000`.

    >>> parse_bytes("16GiB"), parse_bytes("1.5 kB"), parse_bytes("64")
    (17179869184, 1500, 64)
    >>> parse_bytes("lots")
    Traceback (most recent call last):
    ...
    ValueError: expected a size such as 16GiB, 512MiB or 8GB, found 'lots'
    """
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", text)
    unit = match[2].lower() if match else ""
    if match is None or unit not in _UNITS:
        raise ValueError(f"expected a size such as 16GiB, 512MiB or 8GB, found {text!r}")
    return int(float(match[1]) * _UNITS[unit])


@dataclass(frozen=True, slots=True)
class StaticBytes:
    """What exists for the whole step, not counted in its peak: parameters (`trainable` of them get
    gradients and optimizer state), buffers, and the inputs given to it."""

    params: int = 0
    trainable: int = 0
    buffers: int = 0
    inputs: int = 0


@dataclass(frozen=True, slots=True)
class Fit:
    """A step's whole memory: its peak (gradients `.grad` included, made during the step) plus the static
    bytes and the optimizer's state, against a budget (None: no budget given)."""

    batch: int | None
    peak_bytes: int
    static: StaticBytes
    optimizer: str
    optimizer_bytes: int
    budget_bytes: int | None = None

    @property
    def total_bytes(self) -> int:
        s = self.static
        return self.peak_bytes + s.params + s.buffers + s.inputs + self.optimizer_bytes

    @property
    def fits(self) -> bool | None:
        return None if self.budget_bytes is None else self.total_bytes <= self.budget_bytes

    def to_dict(self) -> dict[str, Any]:
        s = self.static
        return {"batch": self.batch, "predicted_peak_bytes": self.peak_bytes, "params_bytes": s.params,
                "buffers_bytes": s.buffers, "inputs_bytes": s.inputs, "optimizer": self.optimizer,
                "optimizer_bytes": self.optimizer_bytes, "total_bytes": self.total_bytes,
                "budget_bytes": self.budget_bytes, "fits": self.fits}

    def __str__(self) -> str:
        s = self.static
        text = (f"peak {human_bytes(self.peak_bytes)} + parameters {human_bytes(s.params)} + buffers "
                f"{human_bytes(s.buffers)} + inputs {human_bytes(s.inputs)} + {self.optimizer} state "
                f"{human_bytes(self.optimizer_bytes)} = {human_bytes(self.total_bytes)}")
        if self.budget_bytes is not None:
            text += f" {'fits in' if self.fits else 'does not fit in'} {human_bytes(self.budget_bytes)}"
        return text


def fit(peak_bytes: int, static: StaticBytes, *, optimizer: str = "none", budget_bytes: int | None = None,
        batch: int | None = None) -> Fit:
    """The step's whole memory with `optimizer`'s state (none, sgd: momentum, adam: two moments).

    >>> fit(100, StaticBytes(params=40, trainable=40), optimizer="adam").total_bytes
    220
    """
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {optimizer!r}")
    return Fit(batch, peak_bytes, static, optimizer, OPTIMIZERS[optimizer] * static.trainable, budget_bytes)


def largest_batch(total_for: Callable[[int], int], budget_bytes: int, *, limit: int = 1 << 24) -> int:
    """The largest batch size whose `total_for(batch)` is at most the budget (0: not even 1).

    A step's memory grows about linearly with the batch: the line through batch
    1 and 2 gives a guess, checked with the guess and the guess + 1 (four calls
    when the line holds), else bracketed by doubling and bisected. `total_for`
    must grow with the batch.

    >>> largest_batch(lambda b: 1000 + 300 * b, 16_000)
    50
    >>> largest_batch(lambda b: 1000 + 3 * b * b, 16_000)
    70
    """
    one = total_for(1)
    if one > budget_bytes:
        return 0
    slope = total_for(2) - one
    guess = limit if slope <= 0 else min(limit, max(1, 1 + (budget_bytes - one) // slope))
    if total_for(guess) <= budget_bytes:
        if guess == limit or total_for(guess + 1) > budget_bytes:
            return guess
        low, high = guess + 1, min(limit, 2 * guess + 2)
        while high < limit and total_for(high) <= budget_bytes:
            low, high = high, min(limit, 2 * high)
        if high == limit and total_for(high) <= budget_bytes:
            return high
    else:
        low, high = 1, guess
    while high - low > 1:  # total_for(low) fits, total_for(high) does not
        mid = (low + high) // 2
        if total_for(mid) <= budget_bytes:
            low = mid
        else:
            high = mid
    return low
