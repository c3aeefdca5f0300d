"""Per-module table of a recorded graph: ops, saved tensor memory and parameters."""

from __future__ import annotations

from ..model import Graph, ModuleRow, ModuleSummary, Node, NodeKind
from .memory.timeline import memory_timeline
from .model_check_nodes import module_verdicts
from .module_tree import ancestors, leaf_storages, module_names, module_types, node_modules, saved_bytes

__all__ = ["ModuleRow", "ModuleSummary", "module_summary"]


def module_summary(graph: Graph) -> ModuleSummary:
    """One row per module of `graph`, in `Graph.modules` order (that is `named_modules()` order).

    Saved tensors count towards the module of the op that keeps them, each
    storage once per module. Modules that made nodes but are missing from
    `Graph.modules` follow, as first met in the graph, with unknown type ("").

    >>> from graphviz_app.model import Graph, Node, NodeKind
    >>> g = Graph((Node("n0", NodeKind.OP, "AddmmBackward0", module="fc"),), ())
    >>> [(r.module, r.ops) for r in module_summary(g)]
    [('', 1), ('fc', 1)]
    """
    modules_of = node_modules(graph)
    names = module_names(graph, modules_of)
    members: dict[str, list[Node]] = {name: [] for name in names}
    for n in graph.nodes:
        own = modules_of.get(n.id)
        if own is None:
            continue
        for a in ancestors(own):  # a node counts towards every module around it
            members[a].append(n)
    types = module_types(graph)
    weights = leaf_storages(graph)
    params = {m.name: (m.params, m.param_bytes) for m in graph.modules}
    at_peak = _held_at_peak(graph) if names else {}  # no module: no replay
    checks = module_verdicts(graph.checks)
    rows = tuple(
        ModuleRow(
            module=name,
            type=types.get(name, ""),
            ops=sum(1 for n in members[name] if n.kind is NodeKind.OP),
            activation_bytes=saved_bytes(members[name], skip=weights),
            params=params.get(name, (0, 0))[0],
            param_bytes=params.get(name, (0, 0))[1],
            peak_bytes=at_peak.get(name, 0),
            check=checks[name].short() if name in checks else None,
        )
        for name in names
    )
    return ModuleSummary(rows, saved_traced=any(n.kind is NodeKind.SAVED for n in graph.nodes))


def _held_at_peak(graph: Graph) -> dict[str, int]:
    """Module -> bytes it holds (its submodules included) at the peak of the step `memory_timeline` replays."""
    held: dict[str, int] = {}
    for m in memory_timeline(graph).at_peak:
        if m.module is not None:
            for a in ancestors(m.module):
                held[a] = held.get(a, 0) + m.total
    return held

