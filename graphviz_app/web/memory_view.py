"""The page's memory panel: what the worker's memory job sends back, and the tables and chart made from it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from ..analysis.memory import MemoryTimeline
from ..model import Graph, human_bytes

__all__ = ["MemoryPanel", "memory_panel_of", "caption", "live_frame", "held_frame"]


@dataclass(frozen=True, slots=True)
class MemoryPanel:
    """One step of a program, predicted from its graph: the timeline and how to name its nodes.

    `labels[node id]` is "OpName (n12) in module, line" for the nodes of the
    timeline; `timeline` is JSON-ready through `timeline.to_dict()`.
    """

    timeline: MemoryTimeline
    labels: tuple[tuple[str, str], ...]

    @property
    def peak_label(self) -> str:
        node = self.timeline.peak_node
        return dict(self.labels).get(node, node) if node is not None else "the end of the forward"


def _label(graph: Graph, node_id: str) -> str:
    n = graph.node(node_id)
    name = n.name or (n.tensor.shape_text if n.tensor is not None else n.kind.value)
    text = f"{name} ({n.id})" if n.kind.value == "op" else f"{name} .grad ({n.id})"
    if n.module:
        text += f" in {n.module}"
    if n.source:
        text += f", {n.source}"
    return text


def memory_panel_of(graph: Graph, timeline: MemoryTimeline) -> MemoryPanel:
    """The panel's record: the timeline and a label per node it names."""
    ids = dict.fromkeys(s.node for s in timeline.steps if s.node is not None)
    return MemoryPanel(timeline, tuple((i, _label(graph, i)) for i in ids))


def caption(panel: MemoryPanel) -> str:
    """One sentence: the peak, when, and what is alive at the end of the forward."""
    t = panel.timeline
    when = (f"while {panel.peak_label} runs (backward step {t.peak_step} of {len(t.steps) - 1})"
            if t.peak_node is not None else "at the end of the forward")
    return (f"Predicted peak of one step (forward, then backward from the output's sum): "
            f"{human_bytes(t.peak_bytes)} {when}; {human_bytes(t.forward_bytes)} alive when backward starts. "
            "Parameters (leaf tensors that require grad) are not counted.")


def live_frame(panel: MemoryPanel) -> pd.DataFrame:
    """Live bytes (KiB) per backward step: when each node starts and the most while it runs."""
    rows: list[dict[str, Any]] = [
        {"step": i, "live KiB": s.before / 1024, "peak KiB": s.peak / 1024} for i, s in enumerate(panel.timeline.steps)
    ]
    return pd.DataFrame(rows).set_index("step")


def held_frame(panel: MemoryPanel) -> pd.DataFrame:
    """What is alive at the peak, one row per module."""
    return pd.DataFrame(
        [(m.module if m.module is not None else "(outside modules)", human_bytes(m.saved), human_bytes(m.gradients),
          human_bytes(m.grads), human_bytes(m.outputs), human_bytes(m.total)) for m in panel.timeline.at_peak],
        columns=["module", "saved tensors", "gradients", ".grad", "outputs", "total"],
    )
