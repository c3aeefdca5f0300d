"""Colour a graph by gradient: edge colour/width by log10 norm, NaN/Inf nodes in red."""

from __future__ import annotations

import math

from graphviz.quoting import attr_list

from ..analysis.gradient_report import gradient_summary
from ..errors import RenderError
from ..model import Edge, EdgeKind, GradInfo, Graph, Node
from .dot_text import escape_text, graphviz_attr
from .style import format_values

__all__ = ["GradientOverlay", "PALETTE", "NONFINITE_COLOR", "grad_text", "default_coloring"]

# From small to large gradient norm, one colour per step of the log10 scale.
PALETTE = ("#a5d8ff", "#4dabf7", "#1971c2", "#6741d9", "#c2255c", "#e8590c")
NONFINITE_COLOR = "#e03131"
NONFINITE_FILL = "#ffc9c9"
ZERO_COLOR = "#adb5bd"
_MAX_WIDTH = 4.0
_SHOWN_VALUES = 6  # gradients this small are written out in the label


def default_coloring(graph: Graph) -> str:
    """The `color_by` a graph is best drawn with: "gradient" when traced with gradients, else "device"."""
    return "gradient" if any(n.grad is not None for n in graph.nodes) else "device"


def grad_text(g: GradInfo) -> str:
    """`grad = [1.333, 2, 2.667]` for small gradients, else its norm (and NaN/Inf counts)."""
    bad = []
    if g.nan:
        bad.append(f"{g.nan} NaN")
    if g.inf:
        bad.append(f"{g.inf} inf")
    if bad:
        return "grad: " + ", ".join(bad) + f" of {g.numel}"
    if g.values is not None and g.numel <= _SHOWN_VALUES:
        return "grad = " + (format_values(g.values) if g.numel != 1 else format_values(g.values)[1:-1])
    if g.numel and g.zero_fraction == 1.0:
        return "grad = 0 (all zero)"
    return f"|grad| = {g.norm:.4g}"


class GradientOverlay:
    """Per-node and per-edge Graphviz attributes of `render(color_by="gradient")`."""

    def __init__(self, graph: Graph) -> None:
        norms = [
            math.log10(e.grad.norm) for e in graph.edges
            if e.grad is not None and e.grad.finite and e.grad.norm > 0
        ]
        if not any(n.grad is not None for n in graph.nodes):
            raise RenderError(
                "color_by='gradient' needs a graph traced with gradients: "
                "call trace(..., gradients=True) (CLI: --gradients)"
            )
        self.low = math.floor(min(norms)) if norms else 0
        self.high = max(math.ceil(max(norms)), self.low + 1) if norms else 1
        self.origin = graph.nonfinite_origin
        self.summary = gradient_summary(graph)

    def _step(self, norm: float) -> float:
        return (math.log10(norm) - self.low) / (self.high - self.low)

    def edge_attrs(self, edge: Edge) -> str | None:
        """Attribute text `' [color=... penwidth=...]'` of a data edge, or None if it has none."""
        g = edge.grad
        if edge.kind is not EdgeKind.DATA or g is None:
            return None
        if not g.finite:
            style = {"color": NONFINITE_COLOR, "penwidth": "3", "style": "bold"}
        elif g.norm == 0:
            style = {"color": ZERO_COLOR, "style": "dashed"}
        else:
            t = min(max(self._step(g.norm), 0.0), 1.0)
            color = PALETTE[min(int(t * len(PALETTE)), len(PALETTE) - 1)]
            style = {"color": color, "penwidth": f"{1 + t * (_MAX_WIDTH - 1):.2g}"}
        style["tooltip"] = graphviz_attr(grad_text(g))
        return attr_list(kwargs=style)

    def node(self, node: Node, label: str) -> tuple[str, str]:
        """The node's label with its gradient line, and extra attributes `k=v ` to prepend."""
        g = node.grad
        if g is None:
            return label, ""
        lines = [label, escape_text(grad_text(g))]
        extra: dict[str, str] = {}
        if not g.finite:
            extra = {"fillcolor": NONFINITE_FILL, "color": NONFINITE_COLOR}
        if node.id == self.origin:
            lines.append("NaN/Inf origin")
            extra.update(color=NONFINITE_COLOR, penwidth="4")
        if not extra:
            return "\\n".join(lines), ""
        return "\\n".join(lines), attr_list(kwargs=extra)[2:-1] + " "

    def legend_rows(self) -> list[str]:
        """Rows for the legend table: the log10 scale, grey for zero, red for NaN/Inf."""
        rows = ['<TR><TD COLSPAN="2"><B>gradient norm (edges)</B></TD></TR>']
        span = self.high - self.low
        for i, color in enumerate(PALETTE):
            lo = 10 ** (self.low + span * i / len(PALETTE))
            rows.append(f'<TR><TD BGCOLOR="{color}"> </TD><TD>&#8805; {lo:.2g}</TD></TR>')
        rows.append(f'<TR><TD BGCOLOR="{ZERO_COLOR}"> </TD><TD>all zero (dashed)</TD></TR>')
        rows.append(f'<TR><TD BGCOLOR="{NONFINITE_COLOR}"> </TD><TD>NaN or Inf</TD></TR>')
        return rows

    def graph_attrs(self) -> dict[str, str]:
        """The summary line, drawn under the graph."""
        return {"label": graphviz_attr(str(self.summary)), "labelloc": "b", "labeljust": "l"}
