"""How a Graph shows itself as a notebook cell's value (`Graph._repr_mimebundle_` calls `mimebundle`)."""

from __future__ import annotations

import base64
import html
from collections.abc import Callable

from ..errors import GraphvizAppError
from ..model import Graph
from ..viewer import notebook_html
from .renderer import export

__all__ = ["SVG_MAX_NODES", "mimebundle", "static_html"]

# Above this many nodes the static SVG is left out: laying it out takes longer than a cell should
# (3,000 nodes take dot 3 s here, 10,000 over 200 s); the viewer folds any size.
SVG_MAX_NODES = 2000


def mimebundle(graph: Graph) -> dict[str, str]:
    """The representations a notebook front end picks from: the interactive viewer (HTML) and a static SVG.

    Front ends that show HTML (Jupyter, VS Code) show the viewer, opening on the same fitted view as
    the HTML file; the others show the SVG (graphs of at most `SVG_MAX_NODES` nodes). Without a
    layout program the SVG is left out. Without the viewer's bundle the HTML is the static picture
    (or, when there is none either, no picture) under a note saying what is missing and how to get it,
    so there is always an HTML form and this never raises for a missing part.
    """
    bundle: dict[str, str] = {"text/plain": repr(graph)}
    viewer, viewer_problem = _attempt(lambda: notebook_html(graph))
    if len(graph.nodes) <= SVG_MAX_NODES:
        svg, svg_problem = _attempt(lambda: export(graph, "svg").decode())
    else:
        svg, svg_problem = None, (f"no static picture in a cell above {SVG_MAX_NODES:,} nodes "
                                  f"({len(graph.nodes):,} here): save(graph, \"graph.svg\") draws one")
    if viewer is not None:
        bundle["text/html"] = viewer
    else:
        notes = [f"The interactive viewer cannot be shown: {viewer_problem}."]
        if svg is not None:
            notes.append("Showing the static picture instead.")
        else:
            notes.append(f"And {svg_problem}.")
        bundle["text/html"] = static_html(svg, " ".join(notes))
    if svg is not None:
        bundle["image/svg+xml"] = svg
    return bundle


def static_html(svg: str | None, note: str) -> str:
    """`note` as text above the SVG picture `svg` (if any), shown as an image: no script in it can run.

    >>> static_html(None, "no <viewer>")
    '<div class="graphviz-app-static"><p style="font: 13px sans-serif; color: #8a4b00">no &lt;viewer&gt;</p></div>'
    """
    picture = ""
    if svg is not None:
        data = base64.b64encode(svg.encode("utf-8")).decode("ascii")
        picture = f'<img alt="autograd graph" style="max-width: 100%" src="data:image/svg+xml;base64,{data}">'
    return (f'<div class="graphviz-app-static"><p style="font: 13px sans-serif; color: #8a4b00">'
            f"{html.escape(note)}</p>{picture}</div>")


def _attempt(make: Callable[[], str]) -> tuple[str | None, str | None]:
    """What `make` returns, or None and the reason it could not (a GraphvizAppError's message)."""
    try:
        return make(), None
    except GraphvizAppError as e:
        return None, str(e)
