"""Lay out within a deadline: engine by measured cost; a folded or partial view when the full one cannot finish.

The plan, before anything runs: predict the view's layout time
(`cost.measure`, times the machine's load); if it takes more than half the
time left, fold modules into boxes, the deepest and largest first, until it
fits; a graph that still does not fit (or has no modules) is cut to the nodes
nearest its output. A layout that runs past its share anyway is stopped, the
prediction corrected by what was seen, and a smaller view tried in the time
that is left. Each change is said in a note, drawn at the top of the picture.
"""

from __future__ import annotations

import dataclasses
import textwrap
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from ..analysis.collapse import collapse, folds_nothing
from ..analysis.module_tree import ancestors, module_depth, module_types, node_modules
from ..model import Graph, NodeKind
from .cost import LayoutCost, load_factor, measure
from .dot_text import dot_lines, free_id
from .layout import LayoutTimeout, choose_engine, lay_out

__all__ = ["DEFAULT_TIMEOUT", "Drawing", "View", "lay_out_within"]

DEFAULT_TIMEOUT = 60.0  # seconds save() and export() give a layout unless told otherwise
SHARE = 0.5  # a view is laid out when its predicted time is at most this share of the time left
MIN_NODES = 50  # the smallest partial view: it lays out in well under a second
LAST_CHANCE_S = 1.0  # what that view gets when planning used the whole deadline
RESERVE = 0.25  # share of the deadline a view that may run long leaves for a smaller one


@dataclass(frozen=True, slots=True)
class View:
    """How the caller asked for the graph to be drawn (`collapse`'s options)."""

    depth: int | None = None
    roll: bool = False
    expanded: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Drawing:
    """A laid-out picture and what it shows.

    `graph` is the graph drawn (after folding or cutting), `folded` the
    modules folded into boxes to meet the deadline, `partial` whether only
    the nodes nearest the output were drawn, `notes` what a person should be
    told (each fold or cut, and why; a `depth` that folds nothing),
    `timeouts` the layouts stopped on the way. A drawing with `busy` set was
    made smaller because the machine was busy: not worth keeping as the answer.
    """

    data: bytes
    graph: Graph
    engine: str
    notes: tuple[str, ...] = ()
    folded: tuple[str, ...] = ()
    partial: bool = False
    seconds: float = 0.0
    timeouts: tuple[LayoutTimeout, ...] = ()

    @property
    def complete(self) -> bool:
        """Whether the picture shows the whole view that was asked for."""
        return not self.folded and not self.partial

    @property
    def busy(self) -> bool:
        return any(t.busy for t in self.timeouts)


@dataclass(frozen=True, slots=True)
class _Plan:
    graph: Graph
    cost: LayoutCost
    engine: str
    seconds: float  # predicted wall seconds on this machine now
    folded: frozenset[str] = frozenset()
    cut_from: int | None = None  # nodes of the view it was cut from


class _Planner:
    """Predicts views of one graph and finds the least-changed one that fits a time."""

    def __init__(self, graph: Graph, view: View, fmt: str, engine: str, *, clusters: bool, legend: bool) -> None:
        self.graph, self.view, self.fmt, self.engine = graph, view, fmt, engine
        self.clusters, self.legend = clusters, legend
        self.factor = load_factor()

    def predict(self, shown: Graph, folded: frozenset[str] = frozenset(), cut_from: int | None = None) -> _Plan:
        cost = measure(shown, clusters=self.clusters, legend=self.legend)
        engine = choose_engine(self.engine, self.fmt, cost)
        return _Plan(shown, cost, engine, cost.seconds(engine) * self.factor, folded, cut_from)

    def folded_view(self, folded: frozenset[str]) -> _Plan:
        v = self.view
        return self.predict(collapse(self.graph, depth=v.depth, roll=v.roll, expanded=v.expanded, folded=folded),
                            folded)

    def fit(self, start: _Plan, budget: float) -> _Plan:
        """The least-changed view from `start` predicted to take at most `budget` seconds."""
        if start.seconds <= budget:
            return start
        best = self._fold(start, budget)
        return best if best.seconds <= budget else self._cut(best, budget)

    def _fold(self, start: _Plan, budget: float) -> _Plan:
        """Fold open modules, deepest level first and largest first within it, until the view fits."""
        plan = start
        for level in sorted(_open_modules(plan.graph), reverse=True):
            modules = _open_modules(plan.graph).get(level, [])
            if not modules:
                continue
            whole = self.folded_view(plan.folded | frozenset(modules))
            if whole.seconds > budget:
                plan = whole
                continue
            low, high = 1, len(modules)  # the fewest of the largest modules whose folding fits
            while low < high:
                mid = (low + high) // 2
                if self.folded_view(plan.folded | frozenset(modules[:mid])).seconds <= budget:
                    high = mid
                else:
                    low = mid + 1
            return whole if low == len(modules) else self.folded_view(plan.folded | frozenset(modules[:low]))
        return plan

    def _cut(self, plan: _Plan, budget: float) -> _Plan:
        """The first nodes (nearest the output) of `plan`'s view, as many as fit, at least MIN_NODES.

        Sizes double from MIN_NODES until one does not fit, then bisect: the work
        follows the size kept, not the graph's (a million-node graph cut to 500 costs
        a few 1,000-node measures).
        """
        total = len(plan.graph.nodes)
        if total <= MIN_NODES:
            return plan  # small already: cutting it would say nothing new
        prefix = _Prefix(plan.graph)
        low, high = MIN_NODES, MIN_NODES  # low always drawn; high: the first size found not to fit
        while high < total and self.predict(prefix.first(high)).seconds <= budget:
            low, high = high, min(2 * high, total)
        if high == total and self.predict(prefix.first(total)).seconds <= budget:
            low = total
        while high - low > max(1, low // 20):
            mid = (low + high) // 2
            if self.predict(prefix.first(mid)).seconds <= budget:
                low = mid
            else:
                high = mid
        return self.predict(prefix.first(low), plan.folded, cut_from=plan.cut_from or total)


class _Prefix:
    """The first k nodes of a graph (walk order: nearest the output first) and the edges among them, for any k."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        place = {n.id: i for i, n in enumerate(graph.nodes)}
        missing = len(place)
        # Edge i is kept once both its ends are: bucketed by its later end.
        self.by_end: list[list[int]] = [[] for _ in range(missing + 1)]
        for i, e in enumerate(graph.edges):
            self.by_end[max(place.get(e.src, missing), place.get(e.dst, missing))].append(i)

    def first(self, keep: int) -> Graph:
        kept = sorted(i for bucket in self.by_end[:keep] for i in bucket)  # in the graph's edge order
        return dataclasses.replace(self.graph, nodes=self.graph.nodes[:keep],
                                   edges=tuple(self.graph.edges[i] for i in kept), truncated=True)


def lay_out_within(
    graph: Graph, fmt: str, *, view: View, to_dot: Callable[[Graph], str], engine: str = "auto",
    timeout: float | None = DEFAULT_TIMEOUT, clusters: bool = True, legend: bool = True,
    progress: Callable[[str], None] | None = None,
) -> Drawing:
    """Lay out `graph` as `view` asks, within `timeout` seconds, folding or cutting it if it must.

    Args:
        graph: the traced graph (not yet collapsed).
        fmt: svg, png or pdf.
        view: depth, roll and expanded, as `collapse` takes them.
        to_dot: the DOT text of a view (the renderer's drawing).
        engine: "auto" (by measured cost), "dot" or "graphviz-pure".
        timeout: seconds for everything; None: lay out the view asked for, however long it takes.
        clusters, legend: as the renderer draws them (they change the cost).
        progress: called with a line at each step and every few seconds of a long layout.

    Raises:
        LayoutTimeout: not even the smallest view could be laid out in time.
        RenderError, DotNotFoundError: as `lay_out`.
    """
    say = progress or (lambda line: None)
    start = time.monotonic()
    planner = _Planner(graph, view, fmt, engine, clusters=clusters, legend=legend)
    asked = planner.predict(collapse(graph, depth=view.depth, roll=view.roll, expanded=view.expanded))
    depth_note = folds_nothing(graph, view.depth) if view.depth is not None else None
    notes = [depth_note] if depth_note else []
    for note in notes:
        say(note)
    timeouts: list[LayoutTimeout] = []
    plan = asked
    while True:
        left: float | None = None
        limit: float | None = None
        if timeout is not None:
            left = timeout - (time.monotonic() - start)
            if left <= 0 and timeouts:
                raise timeouts[-1]
            if left <= 0:
                # Planning took it all (a huge graph, a busy machine): the smallest view gets a last second
                # when the deadline was one a picture could meet; a tiny one is held to.
                plan, limit = planner.fit(plan, 0.0), (LAST_CHANCE_S if timeout >= 10 * LAST_CHANCE_S else 0.0)
            else:
                plan = planner.fit(plan, SHARE * left)
                smallest = plan.cut_from is not None and len(plan.graph.nodes) <= MIN_NODES
                # Time kept back for a smaller view: a quarter of the deadline, as starting the layout program
                # alone can take a second on a busy machine (a tenth left the folded view half a second).
                reserve = min(max(2.0, RESERVE * timeout), 0.5 * left)
                limit = left if smallest else max(left - reserve, min(left, 0.5))
        say(f"laying out {plan.cost} with {plan.engine}: about {_seconds(plan.seconds)}"
            + (f" of the {max(left, 0.0):.0f} s left" if left is not None else ""))
        began = time.monotonic()
        try:
            data = lay_out(_with_notes(to_dot(plan.graph), _changes(asked, plan, timeout)), fmt, engine=plan.engine,
                           node_count=len(plan.graph.nodes), timeout=limit, cost=plan.cost, progress=progress)
        except LayoutTimeout as e:
            timeouts.append(e)
            say(f"stopped: {e}")
            if plan.cut_from is not None and len(plan.graph.nodes) <= MIN_NODES:
                raise
            # The prediction was short by at least this much: smaller views are judged by it from now on.
            planner.factor *= max(2.0, (time.monotonic() - began) / max(plan.seconds, 1e-3))
            plan = planner.predict(plan.graph, plan.folded, plan.cut_from)
            continue
        changes = _changes(asked, plan, timeout)
        for note in changes:
            say(note)
        seconds = time.monotonic() - start
        say(f"laid out in {seconds:.1f} s")
        shown = dataclasses.replace(plan.graph, notes=plan.graph.notes + tuple(c for c in changes
                                                                             if c not in plan.graph.notes))
        return Drawing(data=data, graph=shown, engine=plan.engine, notes=tuple(notes + changes),
                       folded=tuple(sorted(plan.folded)), partial=plan.cut_from is not None, seconds=seconds,
                       timeouts=tuple(timeouts))


def _seconds(s: float) -> str:
    return f"{s:.1f} s" if s < 10 else f"{s:,.0f} s"


def _changes(asked: _Plan, plan: _Plan, timeout: float | None) -> list[str]:
    """The notes saying how the drawn view differs from the one asked for, and why."""
    if plan is asked:
        return []
    deadline = f"the {timeout:g} s deadline" if timeout is not None else "the time"
    full = f"the full view ({asked.cost}) would take about {_seconds(asked.seconds)} to lay out now"
    notes = []
    if plan.folded:
        types = module_types(asked.graph)
        names = sorted(plan.folded, key=lambda m: (module_depth(m), m))
        shown = ", ".join(f"{m} ({types[m]})" if types.get(m) else m for m in names[:6])
        more = f" and {len(names) - 6} more" if len(names) > 6 else ""
        notes.append(f"folded {len(names)} module(s) into boxes to fit {deadline}: {shown}{more}; {full}. "
                     "Allow more time (timeout=, None for no limit) or open one of them (expanded=) to see inside")
    if plan.cut_from is not None:
        notes.append(f"drew only the {len(plan.graph.nodes):,} nodes nearest the output, of {plan.cut_from:,}, "
                     f"to fit {deadline}; {full}. Save .json or .dot for everything, draw fewer nodes (depth=, "
                     "max_nodes=) or allow more time (timeout=)")
    return notes


def _with_notes(source: str, notes: list[str]) -> str:
    """DOT text with the notes as a box at the top of the picture."""
    if not notes:
        return source
    lines = [line for note in notes for line in textwrap.wrap(note, 100)]
    # A node of the graph named "layout-note" is written quoted, as this is: pick a name no node has.
    name = free_id("layout-note", _QuotedIn(source))
    line = (f'\t"{name}" [label={dot_lines(lines, justify="left")} shape=note style=filled fillcolor="#fff3bf" '
            'fontname=Helvetica fontsize=10]\n')
    cut = source.rstrip().rfind("}")
    return source[:cut] + line + source[cut:]


class _QuotedIn:
    """The names written as a whole quoted id somewhere in DOT text (`name in _QuotedIn(source)`)."""

    def __init__(self, source: str) -> None:
        self.source = source

    def __contains__(self, name: object) -> bool:
        return f'"{name}"' in self.source


def _open_modules(shown: Graph) -> dict[int, list[str]]:
    """Depth -> the modules drawn open in `shown`, largest (most drawn nodes) first."""
    if all(n.module is None for n in shown.nodes):
        return {}
    counts: Counter[str] = Counter()
    modules_of = node_modules(shown)
    for node in shown.nodes:
        module = node.module if node.kind is NodeKind.MODULE else modules_of.get(node.id)
        if module is None:
            continue
        inside = ancestors(module)[1:]
        if node.kind is NodeKind.MODULE:
            inside = inside[:-1]  # a box is drawn inside its parent, not open itself
        counts.update(inside)
    levels: dict[int, list[str]] = {}
    for name, _ in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        levels.setdefault(module_depth(name), []).append(name)
    return levels
