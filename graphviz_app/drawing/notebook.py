"""How a Graph shows itself as a notebook cell's value: registered on the model as its display."""

from __future__ import annotations

from ..errors import GraphvizAppError
from ..model import Graph, provide
from ..viewer import notebook_html
from .renderer import export

__all__ = ["SVG_MAX_NODES", "mimebundle"]

# Above this many nodes the static SVG is left out: laying it out takes longer than a cell should
# (3,000 nodes take dot 3 s here, 10,000 over 200 s); the viewer folds any size.
SVG_MAX_NODES = 2000


def mimebundle(graph: Graph) -> dict[str, str]:
    """The representations a notebook front end picks from: the interactive viewer (HTML) and a static SVG.

    Front ends that show HTML (Jupyter, VS Code) show the viewer, opening on the same fitted view as
    the HTML file; the others show the SVG (graphs of at most `SVG_MAX_NODES` nodes). Without a
    layout program the SVG is left out, and without the viewer's bundle the HTML is.

    Raises:
        GraphvizAppError: neither can be made (the message says how to get a layout program).
    """
    bundle: dict[str, str] = {"text/plain": repr(graph)}
    problems: list[GraphvizAppError] = []
    makers = [("text/html", lambda: notebook_html(graph))]
    if len(graph.nodes) <= SVG_MAX_NODES:
        makers.append(("image/svg+xml", lambda: export(graph, "svg").decode()))
    for mime, make in makers:
        try:
            bundle[mime] = make()
        except GraphvizAppError as e:
            problems.append(e)
    if len(bundle) == 1 and problems:
        raise problems[-1]
    return bundle


provide("display", mimebundle)
