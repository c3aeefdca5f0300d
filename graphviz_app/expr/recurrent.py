"""Size a call of a module holding LSTM/GRU layers without running every time step on `meta`.

Meta kernels run a recurrent layer step by step in Python (about 20 ms a
step for two layers), so sizing a 1,000-step sequence on meta would take
longer than running it. The call is sized on meta with the sequence cut to 1
and to 2 steps instead: what it keeps and its multiply-adds grow by the same
amount with every step, so the whole sequence is extrapolated from those two,
and each step's fixed time is charged from `slow_ops.recurrent_cost`.
"""

from __future__ import annotations

from typing import Any

import torch

from .guards import Budget, Refused, to_meta
from .meta_cost import CallCost
from .slow_ops import recurrent_cost

__all__ = ["recurrent_layers", "precheck_recurrent"]

_RECURRENT = (torch.nn.LSTM, torch.nn.GRU, torch.nn.RNN)


def recurrent_layers(module: torch.nn.Module) -> list[torch.nn.Module]:
    """The LSTM/GRU/RNN layers inside `module` (itself included), each once."""
    return [m for m in module.modules() if isinstance(m, _RECURRENT)]


def _time_dim(layer: torch.nn.Module, x: torch.Tensor) -> int:
    return 1 if getattr(layer, "batch_first", False) and x.dim() == 3 else 0


def _measure(meta: torch.nn.Module, values: list[Any], kwargs: dict[str, Any], dim: int, steps: int,
             ) -> tuple[int, int, int]:
    cut = [v.narrow(dim, 0, steps) if i == 0 else v for i, v in enumerate(values)]
    sizes = CallCost()
    with torch.no_grad(), sizes:
        meta(*[to_meta(v) for v in cut], **{k: to_meta(v) for k, v in kwargs.items()})
    return sizes.largest, sizes.nbytes, sizes.flops


def _grown(one: int, two: int, steps: int) -> int:
    """A count measured at 1 and 2 steps, grown linearly to `steps`."""
    return max(two, two + (two - one) * (steps - 2))


def _gates(layer: torch.nn.Module) -> int:
    per = 4 if isinstance(layer, torch.nn.LSTM) else 3 if isinstance(layer, torch.nn.GRU) else 1
    directions = 2 if getattr(layer, "bidirectional", False) else 1
    return per * int(getattr(layer, "hidden_size", 1)) * directions * int(getattr(layer, "num_layers", 1))


def precheck_recurrent(what: str, module: torch.nn.Module, meta: torch.nn.Module, values: list[Any],
                       kwargs: dict[str, Any], budget: Budget) -> bool | None:
    """Refuse a call of a module with recurrent layers whose sequence breaks the limits.

    Returns:
        None when `module` holds no recurrent layer or its input is not a
        sequence (size it as any call); True when the call was sized here; False
        when meta could not run it (run it under the guard instead).

    Raises:
        Refused: its time steps, multiply-adds or memory break the limits.
    """
    layers = recurrent_layers(module)
    x = values[0] if values else None
    if not layers or not isinstance(x, torch.Tensor) or x.dim() < 2:
        return None
    dim = _time_dim(layers[0], x)
    steps = x.shape[dim]
    if steps <= 2:
        return None
    batch = x.shape[1 - dim] if x.dim() == 3 else 1
    limit = budget.limits.max_multiply_adds
    for layer in layers:  # the time first: it needs no meta run at all
        cost = recurrent_cost(layer, steps, batch)
        if cost is not None and cost.units > limit:
            raise Refused(
                f"{what} would take about as long as {cost.units:,} multiply-adds ({cost.detail}); the limit "
                f"is {limit:,} per call (Limits.max_multiply_adds), as one call cannot be stopped once started: "
                "use a shorter sequence or fewer layers")
    try:
        one, two = _measure(meta, values, kwargs, dim, 1), _measure(meta, values, kwargs, dim, 2)
    except Exception:  # noqa: BLE001 - the real call raises it with the program's values
        return False
    largest, nbytes, flops = (_grown(a, b, steps) for a, b in zip(one, two, strict=True))
    # The CPU's fused kernels keep each layer's gates for the whole sequence in one tensor.
    largest = max(largest, *(_gates(layer) * steps * batch for layer in layers))
    budget.before(f"{what} (a tensor on the way)", largest, largest * x.element_size())
    budget.before(f"{what} (every tensor its forward keeps for backward, over {steps:,} steps)", 0, nbytes)
    if flops // 2 > limit:
        raise Refused(f"{what} would take about {flops // 2:,} multiply-adds over {steps:,} steps; the limit is "
                      f"{limit:,} per call (Limits.max_multiply_adds): use a shorter sequence or smaller layers")
    budget.used += nbytes
    return True
