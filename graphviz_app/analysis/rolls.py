"""Which sibling modules roll into one box: the module tree of a graph, its rolled runs, and their titles.

Shared by the drawing's `collapse` and the viewer's box tree (`graphviz_app.viewer.tree`).
"""

from __future__ import annotations

from collections import Counter

from ..model import Edge, EdgeKind, Graph, Node, NodeKind
from .module_tree import ancestors, leaf_storages, module_names, module_types

__all__ = ["ModuleTree", "run_title"]


class ModuleTree:
    """The module tree of a graph: children in `named_modules()` order, member nodes, edges.

    `children[name]` lists a module's submodules ("" is the root), `direct[name]` the nodes it
    owns itself, `types` and `params` what was recorded of each module.
    """

    def __init__(self, graph: Graph, modules_of: dict[str, str | None]) -> None:
        self.graph = graph
        self.modules_of = modules_of
        self.types = module_types(graph)
        self.params = {m.name: (m.params, m.param_bytes) for m in graph.modules}
        self.children: dict[str, list[str]] = {}
        for name in module_names(graph, modules_of):
            if name:
                self.children.setdefault(name.rpartition(".")[0] if "." in name else "", []).append(name)
        self.direct: dict[str, list[Node]] = {}
        for n in graph.nodes:
            own = modules_of.get(n.id)
            if own is not None:
                self.direct.setdefault(own, []).append(n)
        self._node_labels: dict[str, int] | None = None
        self._feeds: set[tuple[str, str]] | None = None
        # Traced with show_saved=False: no saved tensor anywhere, so "0 B" would be untrue.
        self.saved_traced = any(n.kind is NodeKind.SAVED for n in graph.nodes)
        self.weights = leaf_storages(graph)  # saved weights are no activation memory
        self.out_edges: dict[str, list[Edge]] = {}
        for e in graph.edges:
            self.out_edges.setdefault(e.src, []).append(e)

    def members(self, name: str) -> list[Node]:
        """The nodes of a module and of all its submodules."""
        found: list[Node] = []
        stack = [name]
        while stack:
            m = stack.pop()
            found.extend(self.direct.get(m, ()))
            stack.extend(self.children.get(m, ()))
        return found

    def feeds(self) -> set[tuple[str, str]]:
        """(a, b) for sibling modules a, b where a data edge goes from inside a to inside b (computed once)."""
        if self._feeds is not None:
            return self._feeds
        pairs: set[tuple[str, str]] = set()
        done: set[tuple[str, str]] = set()  # a network repeats few (module, module) pairs many times
        for e in self.graph.edges:
            a, b = self.modules_of.get(e.src), self.modules_of.get(e.dst)
            if e.kind is not EdgeKind.DATA or a is None or b is None or a == b or (a, b) in done:
                continue
            done.add((a, b))
            pa, pb = ancestors(a), ancestors(b)
            i = 0
            while i < len(pa) and i < len(pb) and pa[i] == pb[i]:
                i += 1
            if i < len(pa) and i < len(pb):
                pairs.add((pa[i], pb[i]))
        self._feeds = pairs
        return pairs

    def _base_labels(self) -> dict[str, int]:
        """Node id -> a small number naming what the node is, wherever it sits."""
        if self._node_labels is None:
            numbers: dict[tuple[object, ...], int] = {}
            self._node_labels = {}
            for n in self.graph.nodes:
                own = self.modules_of.get(n.id)
                # Leaves are named by parameter ("layers.3.linear.weight"): keep the part
                # after the module, which the module's relative name then completes.
                in_own = n.kind is NodeKind.LEAF and own and n.name.startswith(own + ".")
                name = n.name.rpartition(".")[2] if in_own else n.name
                t = n.tensor
                key = (n.kind, name, n.attrs, None if t is None else (t.shape, t.dtype))
                self._node_labels[n.id] = numbers.setdefault(key, len(numbers))
        return self._node_labels

    def signature(self, name: str) -> tuple[object, ...]:
        """What must match for two modules to roll: type, params, and the inside's nodes and edges."""
        base = self._base_labels()
        prefix = len(name)
        labels = {n.id: ((self.modules_of[n.id] or "")[prefix:], base[n.id]) for n in self.members(name)}
        edges = Counter(
            (label, labels[e.dst], e.kind, e.output_nr, e.slot)
            for node_id, label in labels.items() for e in self.out_edges.get(node_id, ()) if e.dst in labels
        )
        # Plain dicts: their == runs in C, Counter's in Python (a third of the time here).
        return (self.types.get(name, ""), self.params.get(name), dict(Counter(labels.values())), dict(edges))

    def runs(self, parent: str, expanded: frozenset[str] = frozenset()) -> list[list[str]]:
        """`parent`'s submodules split into runs that roll: same signature, each feeding the next, none expanded.

        A module that rolls with nothing is a run of one.
        """
        feeds = self.feeds()
        runs: list[list[str]] = []
        previous_signature: tuple[object, ...] | None = None
        for kid in self.children.get(parent, []):
            run = runs[-1] if runs else None
            if kid in expanded or run is None or run[-1] in expanded or (run[-1], kid) not in feeds:
                runs.append([kid])
                previous_signature = None
                continue
            if previous_signature is None:
                previous_signature = self.signature(run[-1])
            signature = self.signature(kid)
            if signature == previous_signature:
                run.append(kid)
            else:
                runs.append([kid])
                previous_signature = signature
        return runs


def run_title(unit: list[str]) -> tuple[str, str]:
    """A run's short title and the exact modules it stands for.

    >>> run_title(["layers.0", "layers.1", "layers.2"])
    ('layers.0–2', 'layers.0–2')
    >>> run_title(["a", "b", "c", "d"])
    ('a … d', 'a, b, c, d')
    """
    if len(unit) == 1:
        return unit[0], unit[0]
    lasts = [m.rpartition(".")[2] for m in unit]
    if all(s.isascii() and s.isdigit() for s in lasts) and [int(s) for s in lasts] == list(
        range(int(lasts[0]), int(lasts[0]) + len(unit))
    ):
        text = f"{unit[0]}–{lasts[-1]}"
        return text, text
    return (", ".join(unit) if len(unit) <= 3 else f"{unit[0]} … {unit[-1]}"), ", ".join(unit)
