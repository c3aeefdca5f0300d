"""Group a graph's node statements into nested Graphviz clusters, one per module."""

from __future__ import annotations

from graphviz.quoting import attr_list

from ..analysis.module_tree import ancestors, module_types, node_modules
from ..model import Graph, Node, NodeKind
from .dot_text import dot_id

__all__ = ["CLUSTER_STYLE", "cluster_module", "clustered"]

CLUSTER_STYLE = {"style": "rounded", "color": "#adb5bd", "fontsize": "10", "labeljust": "l"}


class _Cluster:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


def cluster_module(node: Node, module: str | None) -> str | None:
    """The module whose cluster holds the node: a box sits in its parent's cluster."""
    if node.kind is NodeKind.MODULE and node.module is not None:
        return None if not node.module else (node.module.rpartition(".")[0] if "." in node.module else "")
    return module


def clustered(graph: Graph, lines: list[str]) -> list[str]:
    """The node statements `lines` (one per node, in order) nested in module clusters.

    A graph without module information gets its lines back unchanged, so its
    DOT text is the same as without clusters.
    """
    modules_of = node_modules(graph)
    places = [cluster_module(n, modules_of.get(n.id)) for n in graph.nodes]
    if all(p is None for p in places):
        return lines
    items: dict[str | None, list[str | _Cluster]] = {None: []}
    for place, line in zip(places, lines, strict=True):
        if place is not None:
            parent: str | None = None
            for name in ancestors(place):
                if name not in items:
                    items[name] = []
                    items[parent].append(_Cluster(name))
                parent = name
        items[place].append(line)
    return _emit(items, module_types(graph))


def _emit(items: dict[str | None, list[str | _Cluster]], types: dict[str, str]) -> list[str]:
    style = attr_list(kwargs=CLUSTER_STYLE).strip(" []")
    out: list[str] = []
    stack = [(iter(items[None]), 0)]  # iterative: nesting follows the user's module tree
    while stack:
        it, level = stack[-1]
        item = next(it, None)
        if item is None:
            stack.pop()
            if level:
                out.append("\t" * level + "}\n")
        elif isinstance(item, _Cluster):
            name, indent = item.name, "\t" * (level + 1)
            kind = types.get(name, "")
            label = f"{name}: {kind}" if name and kind else (name or kind or "(root)")
            out.append(f"{indent}subgraph {dot_id('cluster_' + name)} {{\n")
            out.append(f"{indent}\tgraph [label={dot_id(label)} {style}]\n")
            stack.append((iter(items[name]), level + 1))
        else:
            out.append("\t" * level + item)
    return out
