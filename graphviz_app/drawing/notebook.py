"""How a Graph shows itself as a notebook cell's value: registered on the model as its display."""

from __future__ import annotations

from ..model import Graph, provide
from .renderer import export

__all__ = ["mimebundle"]


def mimebundle(graph: Graph) -> dict[str, str]:
    """The representations a notebook front end picks from: the graph drawn as SVG.

    Raises:
        DotNotFoundError: no layout program is installed (the message says how to get one).
    """
    return {"image/svg+xml": export(graph, "svg").decode()}


provide("display", mimebundle)
