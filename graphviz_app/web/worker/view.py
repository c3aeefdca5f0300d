"""What the page draws of a graph.

All of it, its modules collapsed to a depth that fits, or the part nearest the output.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ...analysis.collapse import collapse as library_collapse
from ...analysis.module_tree import module_depth
from ...analysis.nearest import nearest
from ...model import Graph, NodeKind

__all__ = ["DRAW_BUDGET", "READABLE_NODES", "View", "plan"]

# Most nodes the page lays out. Measured (benchmarks/README.md, web view section):
# 1,500 nodes take dot/graphviz-pure about 1 s here, 5,000 take 5 to 13 s; the
# page's whole job has 15 s, and evaluation and tracing need their share.
DRAW_BUDGET = 1500
# A graph with modules first shows the deepest module level with at most this
# many drawn nodes: the output end at a scale a person can read; boxes open on click.
READABLE_NODES = 250

Collapse = Callable[..., Graph]


@dataclass(frozen=True, slots=True)
class View:
    """The graph to draw and, when it is not the whole graph, what is hidden and how to see it.

    `mode` is "full", "modules" (collapsed at `depth`, `expanded` opened one
    level) or "partial" (the `graph.nodes` nearest the output; `hidden` left out).
    """

    graph: Graph
    mode: str
    note: str = ""
    depth: int | None = None
    expanded: tuple[str, ...] = ()
    hidden: int = 0
    total: int = 0


def plan(
    graph: Graph,
    *,
    budget: int = DRAW_BUDGET,
    readable: int = READABLE_NODES,
    expanded: frozenset[str] = frozenset(),
    collapse: Collapse | None = None,
    depth: int | None = None,
    roll: bool = False,
) -> View:
    """Choose what to draw of `graph` so the layout stays within `budget` nodes.

    Graphs with modules (and a `collapse` function, graphviz_app.analysis.collapse's by
    default) show the deepest module level with at most `readable` nodes,
    then whatever `expanded` opens; graphs without modules are drawn whole
    up to `budget` nodes, else the `budget` nodes nearest the output.
    `depth` (the sidebar's "Module depth") fixes the level instead, and `roll`
    folds repeated modules (the sidebar's "Roll repeats").
    """
    total = len(graph.nodes)
    collapse = collapse if collapse is not None else library_collapse
    if graph.modules:
        view = _module_view(graph, budget=budget, readable=readable, expanded=expanded, collapse=collapse,
                            depth=depth, roll=roll)
        if view is not None:
            return view
    if total <= budget:
        return View(graph=graph, mode="full", total=total)
    part = nearest(graph, limit=budget)
    note = (
        f"Showing the {len(part.graph.nodes):,} nodes nearest the output of {total:,}: "
        f"{part.hidden:,} farther back are hidden, because laying out more than {budget:,} "
        "nodes takes too long for the page. To see them, trace less (lower the node limit, "
        "or run a smaller part of the program), or download the DOT, which holds the whole "
        "graph, and lay it out yourself with 'dot -Tsvg autograd.dot -o autograd.svg' (minutes "
        "for big graphs)."
    )
    return View(graph=part.graph, mode="partial", note=note, hidden=part.hidden, total=total)


def _module_view(
    graph: Graph, *, budget: int, readable: int, expanded: frozenset[str], collapse: Collapse,
    depth: int | None = None, roll: bool = False,
) -> View | None:
    """The deepest module level that is readable (then `expanded` opened), within the budget."""
    total = len(graph.nodes)
    deepest = max((module_depth(m.name) for m in graph.modules), default=0)
    # Collapsing at the deepest module depth draws every op: the whole graph.
    chosen, drawn = None, graph
    if depth is not None or roll:  # the person chose the level (or asked for rolled repeats)
        chosen = min(depth if depth is not None else deepest, deepest)
        drawn = collapse(graph, depth=chosen, roll=roll)
    else:
        for level in range(deepest - 1, -1, -1):
            candidate = collapse(graph, depth=level)
            if len(candidate.nodes) <= readable or level == 0:
                chosen, drawn = level, candidate
                break
        if total <= readable or chosen is None:
            return None  # small enough to draw every op; nothing to expand
    too_big = ""
    if expanded:
        opened = collapse(graph, depth=chosen, expanded=frozenset(expanded), roll=roll)
        if len(opened.nodes) <= budget:
            drawn = opened
        else:
            too_big = (f" Opening {', '.join(sorted(expanded))} would draw {len(opened.nodes):,} nodes, "
                       f"more than the {budget:,} the page lays out, so it stays closed.")
            expanded = frozenset()
    if len(drawn.nodes) > budget:
        drawn = collapse(graph, depth=chosen, roll=True)
    if len(drawn.nodes) > budget:  # ops outside any module: the boxes nearest the output
        part = nearest(drawn, limit=budget)
        drawn = part.graph
        too_big += (f" Only the {budget:,} drawn nodes nearest the output are shown: {part.hidden:,} "
                    "farther back are hidden, because the page lays out at most that many.")
    boxes = sum(1 for n in drawn.nodes if n.kind is NodeKind.MODULE)
    note = (
        f"Modules deeper than level {chosen} are drawn as one box each ({boxes:,} boxes, "
        f"{len(drawn.nodes):,} drawn nodes for {total:,} in the graph). Click a box to open it "
        "one level; the path above the graph closes it again." + too_big
    )
    known = {m.name for m in graph.modules}
    shown = tuple(sorted(n for n in expanded if n in known))
    return View(graph=drawn, mode="modules", note=note, depth=chosen, expanded=shown, total=total)
