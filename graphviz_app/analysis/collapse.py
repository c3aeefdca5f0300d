"""Draw a recorded graph's deep modules as one box each, and fold repeated blocks into one."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from ..errors import CollapseError
from ..model import Edge, EdgeKind, GradInfo, Graph, Node, NodeKind, human_bytes
from ..model.ranks import rank_with_nodes_moved
from .gradient_report import combine_grads
from .module_tree import ancestors, module_depth, node_modules, saved_bytes
from .rolls import ModuleTree, run_title

__all__ = ["collapse", "folds_nothing", "NO_MODULES_NOTE"]

NO_MODULES_NOTE = (
    "this graph has no module information, so it is drawn flat: run the forward inside "
    "`with record(model):` before trace(), or use trace_model(model, *inputs)"
)


def collapse(
    graph: Graph,
    *,
    depth: int | None = None,
    roll: bool = False,
    expanded: frozenset[str] = frozenset(),
    folded: frozenset[str] = frozenset(),
) -> Graph:
    """A new Graph where modules are drawn as boxes (`NodeKind.MODULE` nodes).

    Args:
        graph: a graph traced with module information (`record`, `trace_model`).
        depth: every module deeper than this becomes one box (the root module
            is depth 0, its children depth 1, "layers.0" depth 2); None keeps all.
        roll: fold consecutive sibling modules of the same type and the same
            inside, where each feeds the next, into one box marked `×k`.
        expanded: modules to open although deeper than `depth` (a click on a
            box adds its name). An expanded module is never rolled, so naming
            a rolled box's `module` (its first member) opens that one and
            leaves the rest rolled.
        folded: modules drawn as one box whatever `depth` and `expanded` say
            (how a drawing too big for its deadline is made smaller).

    Returns:
        A Graph whose boxes carry `module` (the module, or the first of a
        rolled run), a title as `name`, and facts as `attrs`: type, ops,
        saved bytes (each storage once), params and, when rolled, the modules
        it stands for. Edges crossing a box's border are kept once per
        (source, destination, kind). Without module information, `graph` is
        returned with a note saying how to record it; a `depth` that folds
        nothing adds a note naming the depth that would (`folds_nothing`).

    Raises:
        CollapseError: `depth` is negative or not a whole number, or `expanded` is not a set of names.

    >>> from graphviz_app.model import Graph, Node, NodeKind, Edge
    >>> g = Graph((Node("n0", NodeKind.OP, "ReluBackward0", module="act"),
    ...            Node("n1", NodeKind.OP, "AddmmBackward0", module="fc")), (Edge("n1", "n0"),))
    >>> ", ".join(n.name for n in collapse(g, depth=0).nodes)
    'act, fc'
    """
    expanded = _check_options(depth, expanded)
    folded = _check_options(None, folded, name="folded")
    if depth is None and not roll and not folded:
        return graph
    modules_of = node_modules(graph)
    if all(m is None for m in modules_of.values()):
        if NO_MODULES_NOTE in graph.notes:
            return graph
        return dataclasses.replace(graph, notes=graph.notes + (NO_MODULES_NOTE,))
    tree = ModuleTree(graph, modules_of)
    units = _choose_units(tree, depth=depth, roll=roll, expanded=expanded, folded=folded)
    shown = _build(graph, tree, units)
    note = folds_nothing(graph, depth) if depth is not None else None
    if note is not None and note not in shown.notes:
        shown = dataclasses.replace(shown, notes=shown.notes + (note,))
    return shown


def folds_nothing(graph: Graph, depth: int) -> str | None:
    """The note for a `depth` that folds no module of `graph` into a box, naming the depth that would; else None.

    >>> from graphviz_app.model import Graph, Node, NodeKind
    >>> g = Graph((Node("n0", NodeKind.OP, "MmBackward0", module="gru"),), ())
    >>> print(folds_nothing(g, 2))  # doctest: +ELLIPSIS
    depth=2 folds nothing: the deepest module with ops is at depth 1 ('gru'); depth=0 draws the modules at depth 1 ...
    >>> folds_nothing(g, 0) is None
    True
    """
    owners = {m for m in node_modules(graph).values() if m is not None}
    if not owners:
        return None
    deepest = max(owners, key=lambda m: (module_depth(m), m))
    level = module_depth(deepest)
    if level <= depth and level == 0:
        return (f"depth={depth} folds nothing: every op belongs to the root module, which is never a box; "
                "record the model's submodules (record(model) around the forward) to fold them")
    if level <= depth:
        return (f"depth={depth} folds nothing: the deepest module with ops is at depth {level} ({deepest!r}); "
                f"depth={level - 1} draws the modules at depth {level} as boxes")
    return None


def _check_options(depth: object, expanded: object, *, name: str = "expanded") -> frozenset[str]:
    if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 0):
        raise CollapseError(
            f"depth must be a whole number >= 0 (0: every child of the root is a box) or None, got {depth!r}"
        )
    if isinstance(expanded, str) or not isinstance(expanded, Iterable):
        raise CollapseError(
            f"{name} must be a set of module names, e.g. frozenset({{'layers.0'}}), got {expanded!r}"
        )
    names = frozenset(expanded)
    if not all(isinstance(n, str) for n in names):
        raise CollapseError(f"{name} must hold module names (str), got {sorted(map(repr, names))}")
    return names


def _choose_units(
    tree: ModuleTree, *, depth: int | None, roll: bool, expanded: frozenset[str], folded: frozenset[str] = frozenset(),
) -> list[list[str]]:
    """The boxes to draw, each a list of modules: one module, or a rolled run of siblings."""
    units: list[list[str]] = []
    stack = [""]
    while stack:
        parent = stack.pop()
        kids = tree.children.get(parent, [])
        for run in tree.runs(parent, expanded) if roll else [[k] for k in kids]:
            if len(run) > 1 or run[0] in folded:
                units.append(run)
            elif depth is None or module_depth(run[0]) <= depth or run[0] in expanded:
                stack.append(run[0])
            else:
                units.append(run)
    return units


def _build(graph: Graph, tree: ModuleTree, units: list[list[str]]) -> Graph:
    unit_of = {m: i for i, unit in enumerate(units) for m in unit}
    taken = {n.id for n in graph.nodes}
    box_ids: list[str] = []
    for unit in units:
        box_id = f"module/{unit[0]}"  # no ":", which DOT reads as a port
        while box_id in taken:  # a hand-built graph may already use the name
            box_id += "'"
        taken.add(box_id)
        box_ids.append(box_id)
    rep: dict[str, str] = {}
    members: list[list[Node]] = [[] for _ in units]
    order: list[Node | int] = []  # a kept node, or the unit whose box stands here
    unit_of_module: dict[str | None, int | None] = {None: None}
    for n in graph.nodes:
        own = tree.modules_of.get(n.id)
        if own not in unit_of_module:  # the outermost box around the module, if any
            unit_of_module[own] = next((unit_of[a] for a in ancestors(own) if a in unit_of), None)
        unit_index = unit_of_module[own]
        if unit_index is None:
            order.append(n)
            continue
        if not members[unit_index]:
            order.append(unit_index)
        members[unit_index].append(n)
        rep[n.id] = box_ids[unit_index]
    nodes = tuple(
        item if isinstance(item, Node) else _box(tree, units[item], members[item], box_ids[item])
        for item in order
    )
    origin = graph.nonfinite_origin
    edges = _edges(graph.edges, rep)
    return dataclasses.replace(
        graph, nodes=_box_grads(nodes, edges, set(box_ids)), edges=edges,
        nonfinite_origin=rep.get(origin, origin) if origin else origin,
        rank=rank_with_nodes_moved(graph.rank, rep),
    )


def _edges(edges: tuple[Edge, ...], rep: dict[str, str]) -> tuple[Edge, ...]:
    """Edges with their ends moved onto boxes: inside ones dropped, crossing ones kept once.

    A kept crossing edge carries the gradients of all the edges it stands for,
    taken together (`combine_grads`), so a folded view can be coloured by gradient.
    """
    kept: list[Edge] = []
    merged: dict[tuple[str, str, EdgeKind], tuple[int, list[GradInfo]]] = {}
    for e in edges:
        src, dst = rep.get(e.src, e.src), rep.get(e.dst, e.dst)
        if src == e.src and dst == e.dst:
            kept.append(e)
        elif src != dst:
            key = (src, dst, e.kind)
            if key not in merged:
                merged[key] = (len(kept), [])
                # An input index means nothing at a box's border; the op's own side keeps its slot.
                kept.append(Edge(src, dst, e.kind, e.output_nr if src == e.src else 0, e.slot if dst == e.dst else 0))
            if e.grad is not None:
                merged[key][1].append(e.grad)
    for at, grads in merged.values():
        if grads:
            kept[at] = dataclasses.replace(kept[at], grad=combine_grads(grads))
    return tuple(kept)


def _box_grads(nodes: tuple[Node, ...], edges: tuple[Edge, ...], boxes: set[str]) -> tuple[Node, ...]:
    """Boxes with the gradient their outputs receive: the edges leaving the box, taken together."""
    leaving: dict[str, list[GradInfo]] = {}
    for e in edges:
        if e.src in boxes and e.grad is not None and e.kind is EdgeKind.DATA:
            leaving.setdefault(e.src, []).append(e.grad)
    if not leaving:
        return nodes
    return tuple(dataclasses.replace(n, grad=combine_grads(leaving[n.id])) if n.id in leaving else n for n in nodes)


def _box(tree: ModuleTree, unit: list[str], members: list[Node], box_id: str) -> Node:
    type_name = tree.types.get(unit[0], "")
    span, stands_for = run_title(unit)
    title = f"{span}: {type_name}" if type_name else span
    attrs: list[tuple[str, str]] = []
    if len(unit) > 1:
        title += f" ×{len(unit)}"
        attrs.append(("stands for", stands_for))
    if type_name:
        attrs.append(("type", type_name))
    params = sum(tree.params.get(m, (0, 0))[0] for m in unit)
    param_bytes = sum(tree.params.get(m, (0, 0))[1] for m in unit)
    attrs += [
        ("ops", f"{sum(1 for n in members if n.kind is NodeKind.OP):,}"),
        ("activations", human_bytes(saved_bytes(members, skip=tree.weights)) if tree.saved_traced else "not traced"),
        ("params", f"{params:,} ({human_bytes(param_bytes)})"),
    ]
    return Node(box_id, NodeKind.MODULE, title, attrs=tuple(attrs), module=unit[0])
