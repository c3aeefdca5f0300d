"""The language's job for a worker process: evaluate a program there, describe its tensors as plain data."""

from __future__ import annotations

from typing import Any

import torch

from ..runner import HARD_GRACE_S, hard_deadline
from .api import evaluate
from .limits import Limits

__all__ = ["evaluate_job", "describe_tensor"]

_MAX_VALUES = 16


def evaluate_job(source: str, limits: Limits | None = None, device: str | None = None,
                 dtype: str | None = None) -> dict[str, Any]:
    """Evaluate `source` and describe the results as plain, picklable data.

    In a worker, one operation still running `HARD_GRACE_S` past `limits.max_seconds`
    ends the worker (the runner reports a time-out).

    Returns:
        ``{"output": [description, ...], "variables": {name: description}}``,
        each description as `describe_tensor` gives it.
    """
    limits = limits or Limits()
    with hard_deadline(limits.max_seconds + HARD_GRACE_S):
        ev = evaluate(source, limits=limits, device=device, dtype=dtype, isolated=False)
    outputs = ev.output if isinstance(ev.output, tuple) else (ev.output,)
    return {
        "output": [describe_tensor(t) for t in outputs],
        "variables": {name: describe_tensor(t) for name, t in ev.variables.items()},
    }


def describe_tensor(t: torch.Tensor) -> dict[str, Any]:
    """Shape, dtype, device, requires_grad, and the values of small tensors."""
    small = t.numel() <= _MAX_VALUES
    return {
        "shape": list(t.shape),
        "dtype": str(t.dtype).removeprefix("torch."),
        "device": str(t.device),
        "requires_grad": t.requires_grad,
        "values": t.detach().cpu().flatten().tolist() if small else None,
    }
