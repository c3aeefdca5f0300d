"""How a Graph, or a pair in synced panes, shows itself as a notebook cell's value (`mimebundle`, `pair_mimebundle`)."""

from __future__ import annotations

import base64
import html
from collections.abc import Callable, Sequence

from ..analysis.collapse import collapse
from ..analysis.diff import GraphDiff
from ..analysis.module_tree import module_depth, node_modules
from ..errors import GraphvizAppError
from ..model import Graph
from ..viewer import notebook_html
from ..viewer.compare import compare_notebook_html
from .diff_style import export_diff
from .renderer import export

__all__ = ["SVG_MAX_NODES", "PICTURE_MAX_BOXES", "UNTRUSTED_NOTE", "mimebundle", "pair_mimebundle", "module_picture",
           "static_html"]

# Above this many nodes the static SVG is left out: laying it out takes longer than a cell should
# (3,000 nodes take dot 3 s here, 10,000 over 200 s); the viewer folds any size.
SVG_MAX_NODES = 2000

# The static picture draws the deepest module level (repeats rolled) with at most this many nodes: the
# model's structure, legible on a cell's width and a few tens of kB, not every op.
PICTURE_MAX_BOXES = 80

# Shown instead of the viewer where the front end strips its frame and scripts: JupyterLab (and Notebook 7)
# sanitize the HTML of a notebook that is not trusted, keeping text and pictures only.
UNTRUSTED_NOTE = (
    "The interactive viewer is not shown: this notebook is not trusted, so the front end removed its frame and "
    "scripts. Trust it (JupyterLab: the command palette's \"Trust Notebook\"; classic Notebook: File > Trust "
    "Notebook) or run the cell again."
)

# The viewer's script goes into the first cell output of this kernel only (gzipped, ~0.7 MB); later
# cells' frames get it from the page (`viewer.html.notebook_html`).
_PAGE = {"bundle_sent": False}


def mimebundle(graph: Graph, *, standalone: bool = False) -> dict[str, str]:
    """The representations a notebook front end picks from: the interactive viewer (HTML) and a static SVG.

    Front ends that show HTML (Jupyter, VS Code) show the viewer, opening on the same fitted view as
    the HTML file; its script is carried by the first such output of the kernel only (later cells'
    frames get it from the page). The others show the SVG: the module-level picture
    (`module_picture`), when it has at most `SVG_MAX_NODES` nodes. `standalone`: the HTML carries the
    script whatever went before and is not counted as the page's copy (`Graph._repr_html_`, shown
    alone). A front end that strips the frame (an untrusted notebook in JupyterLab) shows the SVG under
    `UNTRUSTED_NOTE`, carried in the HTML. Without a layout program the SVG is left out. Without the viewer's
    bundle the HTML is the static picture
    (or, when there is none either, no picture) under a note saying what is missing and how to get it,
    so there is always an HTML form and this never raises for a missing part.
    """
    picture = module_picture(graph)
    return _bundle(repr(graph), lambda carry, fallback: notebook_html(graph, with_bundle=carry, fallback=fallback),
                   lambda: export(picture, "svg").decode(), len(picture.nodes), standalone=standalone)


def pair_mimebundle(graph_a: Graph, graph_b: Graph, *, labels: Sequence[str] = ("a", "b"), title: str | None = None,
                    rankdir: str = "TB", text: str = "", found: GraphDiff | None = None,
                    standalone: bool = False) -> dict[str, str]:
    """Two graphs as a notebook cell's value: the synced panes (HTML; the script carried as `mimebundle` carries
    it, once per kernel), the diff drawn as one picture (SVG, when the two have at most `SVG_MAX_NODES` nodes
    together) and `text` (text/plain, the diff's summary). `found`: `diff(graph_a, graph_b)`, when already made.

    Raises:
        ValueError, TypeError: bad `labels`, `rankdir` or graphs (`viewer.compare.compare_payload`).
    """
    def html_of(carry: bool, fallback: str) -> str:
        return compare_notebook_html(graph_a, graph_b, labels=labels, title=title, rankdir=rankdir, found=found,
                                     with_bundle=carry, fallback=fallback)

    return _bundle(text, html_of, lambda: export_diff(graph_a, graph_b, "svg", found, rankdir=rankdir).decode(),
                   len(graph_a.nodes) + len(graph_b.nodes), standalone=standalone)


def _bundle(text: str, viewer_of: Callable[[bool, str], str], svg_of: Callable[[], str], svg_nodes: int, *,
            standalone: bool) -> dict[str, str]:
    """text/plain, the viewer's HTML (the script in it unless the page has it already; the SVG under a note for
    front ends that strip the viewer's frame) and, if small, the SVG."""
    bundle: dict[str, str] = {"text/plain": text}
    carry = standalone or not _PAGE["bundle_sent"]
    if svg_nodes <= SVG_MAX_NODES:
        svg, svg_problem = _attempt(svg_of)
    else:
        svg, svg_problem = None, (f"no static picture in a cell above {SVG_MAX_NODES:,} nodes "
                                  f"({svg_nodes:,} here): save(graph, \"graph.svg\") draws one")
    stripped = UNTRUSTED_NOTE + (" Below: the static picture." if svg is not None else f" And {svg_problem}.")
    viewer, viewer_problem = _attempt(lambda: viewer_of(carry, static_html(svg, stripped)))
    if viewer is not None:
        _PAGE["bundle_sent"] = _PAGE["bundle_sent"] or not standalone
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


def module_picture(graph: Graph) -> Graph:
    """`graph` collapsed to its module structure: the deepest module depth (repeats rolled) drawing at most
    `PICTURE_MAX_BOXES` nodes, else depth 0; `graph` itself when it has no modules or is that small already.

    >>> from graphviz_app.model import Graph, Node, NodeKind, Edge
    >>> g = Graph((Node("n0", NodeKind.OP, "ReluBackward0", module="act"),
    ...            Node("n1", NodeKind.OP, "AddmmBackward0", module="fc.inner")), (Edge("n1", "n0"),))
    >>> len(module_picture(g).nodes)
    2
    """
    if len(graph.nodes) <= PICTURE_MAX_BOXES:
        return graph
    owners = {m for m in node_modules(graph).values() if m is not None}
    if not owners:
        return graph
    chosen = collapse(graph, depth=0, roll=True)
    for depth in range(1, max(module_depth(m) for m in owners) + 1):
        deeper = collapse(graph, depth=depth, roll=True)
        if len(deeper.nodes) > PICTURE_MAX_BOXES:
            break
        chosen = deeper
    return chosen


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
