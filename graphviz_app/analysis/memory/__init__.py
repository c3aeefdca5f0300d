"""Memory of a training step predicted from its graph: the timeline, the peak, what holds it, what would fit."""

from __future__ import annotations

from .records import MeasuredMemory, MemoryStep, MemoryTimeline, ModuleBytes
from .timeline import memory_timeline

__all__ = ["memory_timeline", "MemoryTimeline", "MemoryStep", "ModuleBytes", "MeasuredMemory"]
