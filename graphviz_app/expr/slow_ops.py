"""Costs of ops that are slow per element: pooling windows, SVD-based norms, `cdist` by p, recurrent layers.

A matmul does a multiply-add in about 0.1 ns on one core; these do far less
per nanosecond, so their cost is counted in multiply-add equivalents (one
unit is about 0.5 ns here: `Limits.max_multiply_adds`, 2·10^10, is then
about 10 s on a slow core, the program's own time limit). Weights measured
on one CPU thread (benchmarks/README.md, "expr: slow ops"):

- a pooling window read: max_pool1d 0.6 ns, avg pools and max_pool2d 3 ns;
- `cdist`: 0.6 ns per multiply-add at p=2 (a matmul), 2 ns at p=1, 0 and inf,
  30 ns at any other p (a `pow` per element);
- an SVD (`norm(p='nuc')`): about 1 ns per m·n·min(m, n);
- a recurrent layer step: LSTM about 50 µs, GRU about 0.8 ms (forward and
  backward, small sizes: torch runs a step as a handful of small kernels,
  and the GRU on the CPU as separate autograd ops), plus its gates' multiply-adds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["SlowCost", "pool_cost", "norm_cost", "cdist_cost", "recurrent_cost", "POOLS"]

_HUGE = 2**62
POOLS = {"max_pool1d": (1, 2), "avg_pool1d": (1, 6), "max_pool2d": (2, 6), "avg_pool2d": (2, 6)}
_SVD_UNITS = 2
_CDIST_UNITS = {2.0: 1, 1.0: 4, 0.0: 4, math.inf: 4}
_CDIST_OTHER = 60
_STEP_UNITS = {torch.nn.LSTM: 100_000, torch.nn.GRU: 1_500_000, torch.nn.RNN: 40_000}
_GATES = {torch.nn.LSTM: 4, torch.nn.GRU: 3, torch.nn.RNN: 1}


@dataclass(frozen=True, slots=True)
class SlowCost:
    """Multiply-add equivalents of one op, and what they are made of, for the message."""

    units: int
    detail: str


def _cap(n: int) -> int:
    return min(n, _HUGE)


def _ints(value: Any, n: int) -> list[int] | None:
    if type(value) is int:
        return [value] * n
    if isinstance(value, (list, tuple)) and len(value) == n and all(type(v) is int for v in value):
        return list(value)
    return None


def pool_cost(name: str, values: Sequence[Any], kwargs: dict[str, Any], out_numel: int | None) -> SlowCost | None:
    """`F.max_pool1d(x, kernel_size, ...)` and kin: every output reads a whole window."""
    spatial, units = POOLS[name]
    kernel = _ints(values[1] if len(values) > 1 else kwargs.get("kernel_size"), spatial)
    if kernel is None or out_numel is None:
        return None
    window = _cap(math.prod(max(k, 1) for k in kernel))
    reads = _cap(out_numel * window)
    shown = "x".join(f"{k:,}" for k in kernel)
    return SlowCost(_cap(reads * units), f"a window of {shown} read at each of {out_numel:,} output positions")


def norm_cost(values: Sequence[Any], kwargs: dict[str, Any]) -> SlowCost | None:
    """`torch.norm(x, p='nuc')`: a singular value decomposition per matrix (a number p is a vector norm)."""
    x = values[0] if values else kwargs.get("input")
    p = values[1] if len(values) > 1 else kwargs.get("p", "fro")
    dim = values[2] if len(values) > 2 else kwargs.get("dim")
    if not isinstance(x, torch.Tensor) or p != "nuc":
        return None
    if dim is None and x.dim() == 2:
        dim = (0, 1)
    if not (isinstance(dim, (list, tuple)) and len(dim) == 2 and all(type(d) is int for d in dim)):
        return None  # torch says what it expects
    try:
        m, n = x.shape[dim[0]], x.shape[dim[1]]
    except IndexError:
        return None  # torch says the dimension is out of range
    batch = x.numel() // max(m * n, 1)
    work = _cap(batch * m * n * min(m, n))
    matrices = "one matrix" if batch == 1 else f"{batch:,} matrices"
    return SlowCost(_cap(work * _SVD_UNITS), f"a singular value decomposition of {matrices} of {m:,}x{n:,}")


def cdist_cost(values: Sequence[Any], kwargs: dict[str, Any], out_numel: int | None) -> SlowCost | None:
    """`torch.cdist(a, b, p)`: a distance per output pair over the feature dimension, slower for odd p."""
    a = values[0] if values else kwargs.get("x1")
    p = values[2] if len(values) > 2 else kwargs.get("p", 2.0)
    if not isinstance(a, torch.Tensor) or out_numel is None or not isinstance(p, (int, float)):
        return None
    features = a.shape[-1] if a.dim() else 1
    units = _CDIST_UNITS.get(float(p), _CDIST_OTHER)
    return SlowCost(_cap(out_numel * features * units),
                    f"{out_numel:,} distances over {features:,} features at p={p:g}")


def recurrent_cost(module: torch.nn.Module, steps: int, batch: int) -> SlowCost | None:
    """One call of an LSTM/GRU/RNN over `steps` time steps: per-step overhead and gate multiply-adds."""
    kind = next((k for k in _STEP_UNITS if isinstance(module, k)), None)
    if kind is None:
        return None
    layers = int(getattr(module, "num_layers", 1))
    directions = 2 if getattr(module, "bidirectional", False) else 1
    hidden, size = int(getattr(module, "hidden_size", 0)), int(getattr(module, "input_size", 0))
    gate_macs = _GATES[kind] * hidden * (size + hidden) * max(batch, 1) * 3  # forward and backward
    cells = _cap(steps * layers * directions)
    units = _cap(cells * (_STEP_UNITS[kind] + gate_macs))
    return SlowCost(units, f"{steps:,} time steps x {layers} layer(s) x {directions} direction(s) of "
                           f"{kind.__name__}")
