"""What colours a drawing beyond devices: gradients, orders of derivatives, a diff's changes, or check verdicts."""

from __future__ import annotations

from typing import Protocol

from ..model import Edge, Graph, Node
from .check_overlay import CheckOverlay
from .gradient_style import GradientOverlay
from .order_style import OrderOverlay

__all__ = ["Overlay", "overlay_for"]


class Overlay(Protocol):
    """Per-node and per-edge Graphviz attributes laid over the device colours."""

    def node(self, node: Node, label: str) -> tuple[str, str]:
        """The node's label, and extra attributes `k=v ` to put before its own.

        `label` is escaped DOT text (`dot_text.escape_text` per line, joined by `\\n`); every line
        an overlay adds goes through `escape_text` too: the renderer quotes the result as it is.
        """
        ...

    def edge_attrs(self, edge: Edge) -> str | None:
        """An edge's whole attribute text `' [k=v ...]'`, or None to keep its kind's."""
        ...

    def legend_rows(self) -> list[str]:
        """Rows for the legend's HTML table."""
        ...

    def graph_attrs(self) -> dict[str, str]:
        """Attributes of the whole graph (a summary line)."""
        ...


def overlay_for(graph: Graph, color_by: str) -> Overlay | None:
    """The overlay `render(color_by=...)` draws: None for "device"."""
    if color_by == "gradient":
        return GradientOverlay(graph)
    if color_by == "order":
        return OrderOverlay(graph)
    if color_by == "check":
        return CheckOverlay(graph)
    return None
