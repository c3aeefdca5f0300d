"""Predicted against measured, node by node: the most bytes alive while each backward node ran."""

from __future__ import annotations

from dataclasses import dataclass

from .records import MeasuredMemory, MemoryTimeline

__all__ = ["NodeBytes", "side_by_side"]


@dataclass(frozen=True, slots=True)
class NodeBytes:
    """One backward node (None: the end of the forward): the bytes predicted and measured while it ran."""

    node: str | None
    predicted: int
    measured: int

    @property
    def gap(self) -> int:
        """Measured less predicted: what the graph did not show (a temporary inside the op, say)."""
        return self.measured - self.predicted


def side_by_side(timeline: MemoryTimeline, measured: MeasuredMemory) -> tuple[NodeBytes, ...]:
    """Each step both ran, in the measured run order: the predicted and the measured peak while it ran.

    The timeline and the measurement must come from the same graph (`run_step` gives both), so
    their steps carry the same node ids; a node only one of them ran is left out.

    >>> from graphviz_app.analysis.memory import MemoryStep
    >>> t = MemoryTimeline((MemoryStep(None, 8, 8, 8), MemoryStep("n1", 8, 24, 8)), 24, 1)
    >>> m = MeasuredMemory((MemoryStep(None, 8, 8, 8), MemoryStep("n1", 8, 40, 8)), 40, 8, "storages", "cpu")
    >>> [(r.node, r.predicted, r.measured, r.gap) for r in side_by_side(t, m)]
    [(None, 8, 8, 0), ('n1', 24, 40, 16)]
    """
    predicted = {s.node: s.peak for s in timeline.steps}
    return tuple(NodeBytes(s.node, predicted[s.node], s.peak) for s in measured.steps if s.node in predicted)
