"""Per-module table of a recorded graph: ops, saved tensor memory and parameters."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ._module_tree import ancestors, leaf_storages, module_names, module_types, node_modules, saved_bytes
from .model import Graph, Node, NodeKind, human_bytes

__all__ = ["ModuleRow", "ModuleSummary", "module_summary"]


@dataclass(frozen=True, slots=True)
class ModuleRow:
    """One module: its ops and activations include those of its submodules, as its params do.

    `activation_bytes` is what the module's saved tensors hold beyond its
    parameters: a weight an op saves for backward is counted under params.
    """

    module: str
    type: str
    ops: int
    activation_bytes: int
    params: int
    param_bytes: int


@dataclass(frozen=True, slots=True)
class ModuleSummary:
    """The rows in `named_modules()` order; `str()` prints them as a table."""

    rows: tuple[ModuleRow, ...]
    saved_traced: bool = True  # False: traced with show_saved=False, so saved bytes are unknown

    def __iter__(self) -> Iterator[ModuleRow]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def __str__(self) -> str:
        if not self.rows:
            return "no module information: trace inside `with record(model):`, or use trace_model(model, *inputs)"
        header = ("module", "type", "ops", "activations", "params", "param bytes")
        table = [header] + [
            (
                r.module or "(root)",
                r.type or "?",
                f"{r.ops:,}",
                human_bytes(r.activation_bytes) if self.saved_traced else "not traced",
                f"{r.params:,}",
                human_bytes(r.param_bytes),
            )
            for r in self.rows
        ]
        widths = [max(len(row[i]) for row in table) for i in range(len(header))]
        lines = []
        for row in table:
            cells = [row[0].ljust(widths[0]), row[1].ljust(widths[1])]
            cells += [cell.rjust(width) for cell, width in zip(row[2:], widths[2:])]
            lines.append("  ".join(cells).rstrip())
        return "\n".join(lines)


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
    rows = tuple(
        ModuleRow(
            module=name,
            type=types.get(name, ""),
            ops=sum(1 for n in members[name] if n.kind is NodeKind.OP),
            activation_bytes=saved_bytes(members[name], skip=weights),
            params=params.get(name, (0, 0))[0],
            param_bytes=params.get(name, (0, 0))[1],
        )
        for name in names
    )
    return ModuleSummary(rows, saved_traced=any(n.kind is NodeKind.SAVED for n in graph.nodes))
