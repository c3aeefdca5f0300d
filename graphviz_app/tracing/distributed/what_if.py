"""Several setups of one job side by side at one world size, each forecast on a fake cluster."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ...analysis.distributed import WhatIf
from ...errors import DistributedError
from .fake_cluster import forecast_world

__all__ = ["what_if"]


def what_if(setups: Mapping[str, Callable[[], Any]], *, world_size: int) -> tuple[WhatIf, ...]:
    """Each setup's FUNC (`reshard_after_forward`, mixed precision, checkpointing, DDP or FSDP2 or FSDP+TP, ...)
    forecast for rank 0 at `world_size`, in the order given.

    A setup that cannot be forecast (a mesh the world size does not split, DDP
    looking for unused parameters) keeps its row, with the reason instead of figures.
    """
    rows = []
    for label, func in setups.items():
        try:
            rows.append(WhatIf(label, forecast_world(func, world_size=world_size, where=label)))
        except DistributedError as e:
            rows.append(WhatIf(label, None, str(e).splitlines()[0]))
    return tuple(rows)
