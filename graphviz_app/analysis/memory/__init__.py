"""Memory of a training step predicted from its graph: the timeline, the peak, what holds it, what would fit.

`memory_timeline` replays the autograd engine over a graph; `plan_checkpoints` names modules to
checkpoint under a budget; `fit` adds what exists anyway (parameters, buffers, inputs, optimizer
state). No torch: the torch side (measuring, forecasting on meta, applying a plan) is
`graphviz_app.tracing.memory`.
"""

from __future__ import annotations

from .checkpoint import CheckpointPlan, plan_checkpoints
from .compare import NodeBytes, side_by_side
from .fit import Fit, StaticBytes, fit, largest_batch, parse_bytes
from .records import HolderKind, MeasuredMemory, MemoryStep, MemoryTimeline, ModuleBytes
from .timeline import memory_timeline

__all__ = [
    "memory_timeline", "MemoryTimeline", "HolderKind", "MemoryStep", "ModuleBytes", "MeasuredMemory",
    "plan_checkpoints", "CheckpointPlan", "fit", "Fit", "StaticBytes", "largest_batch", "parse_bytes",
    "side_by_side", "NodeBytes",
]
