"""The boxes the viewer draws a graph in: modules, rolled repeats, folded runs and parts of big flat graphs.

Every node sits in one group; groups nest. A group is a module (its nodes and
submodules), a roll (consecutive identical sibling modules: `layers.0–11 ×12`,
each member one instance), a fold (a run of ops repeating the same names in a
graph or module without submodules for them: `SinBackward0 → MulBackward0
×50,000`, each repetition one instance) or a part (a slice of a crowded group,
by distance from the output). The browser lays out one open group at a time,
so no group holds more than about `CROWDED` direct children.
"""

from __future__ import annotations

import operator
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import compress
from operator import attrgetter

from ..analysis.module_tree import module_depth, module_names, module_types, node_modules
from ..analysis.rolls import ModuleTree, run_title
from ..model import Graph, NodeKind, node_positions

__all__ = ["CROWDED", "PART_ITEMS", "Tree", "build_tree", "initial_open", "open_to_depth"]

# A group with more direct children than this gets folds, then parts.
CROWDED = 150
# Ops and boxes per part (a part's own saved tensors and leaves come along).
PART_ITEMS = 60
# A fold needs this many repetitions, covering at least MIN_FOLD_OPS ops; its unit at most MAX_PERIOD ops.
MIN_REPEATS = 4
MIN_FOLD_OPS = 8
MAX_PERIOD = 24
# The opening view shows at most this many items (nodes and closed boxes).
READABLE = 120
# Field getters in C (an enum's `_value_` is a plain attribute; `.value` is a Python property).
_MODULE = attrgetter("module")
_KIND = attrgetter("kind._value_")


@dataclass(slots=True)
class Tree:
    """Groups as columns (group 0 is the whole graph), and each node's group and instance.

    `kind[g]` is "root", "module", "roll", "fold" or "part"; `instance[g]` is
    the group's place among its roll's instances (-1 when its parent is no
    roll); `node_instance[i]` node i's repetition within its fold (-1: shared
    by all, or not in a fold); `count[g]` a roll's or fold's instances.
    """

    parent: list[int]
    kind: list[str]
    label: list[str]
    module: list[str | None]
    instance: list[int]
    count: list[int]
    node_group: list[int]
    node_instance: list[int]

    def add(self, parent: int, kind: str, label: str, module: str | None = None) -> int:
        self.parent.append(parent)
        self.kind.append(kind)
        self.label.append(label)
        self.module.append(module)
        self.instance.append(-1)
        self.count.append(0)
        return len(self.parent) - 1

    def to_dict(self) -> dict[str, list[object]]:
        return {"parent": list(self.parent), "kind": list(self.kind), "label": list(self.label),
                "module": list(self.module), "instance": list(self.instance), "count": list(self.count),
                "node_group": list(self.node_group), "node_instance": list(self.node_instance)}


def build_tree(graph: Graph, *, roll: bool = True, crowded: int = CROWDED, part_items: int = PART_ITEMS,
               ends: tuple[Sequence[int], Sequence[int]] | None = None) -> Tree:
    """Group `graph`'s nodes into nested boxes (see the module docstring).

    `roll=False` leaves consecutive identical modules side by side instead of rolling them into one box.
    `ends`: each edge's source and destination index (the compact columns), when the caller has them.

    >>> from graphviz_app.model import Edge, Node
    >>> names = ["MulBackward0", "SinBackward0"] * 50
    >>> g = Graph(tuple(Node(f"n{i}", NodeKind.OP, name) for i, name in enumerate(names)),
    ...           tuple(Edge(f"n{i + 1}", f"n{i}") for i in range(99)))
    >>> tree = build_tree(g, crowded=20)
    >>> tree.label[1], tree.count[1], tree.node_instance[:4]
    ('SinBackward0 → MulBackward0 ×50', 50, [49, 49, 48, 48])
    """
    tree = Tree([-1], ["root"], [""], [""], [-1], [0], [0] * len(graph.nodes), [-1] * len(graph.nodes))
    if any(m is not None for m in map(_MODULE, graph.nodes)):  # else every node is in the graph's box (0)
        modules_of = node_modules(graph)
        group_of_module: dict[str, int] = {"": 0}
        _module_groups(graph, tree, modules_of, group_of_module, roll=roll)
        for i, n in enumerate(graph.nodes):
            own = modules_of.get(n.id)
            tree.node_group[i] = group_of_module.get(own, 0) if own is not None else 0
    _Crowding(graph, tree, crowded=crowded, part_items=part_items, ends=ends).run()
    return tree


def _module_groups(graph: Graph, tree: Tree, modules_of: dict[str, str | None], group_of: dict[str, int], *,
                   roll: bool) -> None:
    types = module_types(graph)
    names = module_names(graph, modules_of)
    for name in names:  # parents come before their children
        if name:
            parent = group_of[name.rpartition(".")[0] if "." in name else ""]
            label = f"{name}: {types[name]}" if types.get(name) else name
            group_of[name] = tree.add(parent, "module", label, name)
    if not roll:
        return
    modules = ModuleTree(graph, modules_of)
    for owner in names:
        for run in modules.runs(owner):
            if len(run) < 2:
                continue
            span, _ = run_title(run)
            kind = types.get(run[0], "")
            box = tree.add(group_of[owner], "roll", f"{span}: {kind} ×{len(run)}" if kind else f"{span} ×{len(run)}",
                           run[0])
            tree.count[box] = len(run)
            for i, member in enumerate(run):
                tree.parent[group_of[member]] = box
                tree.instance[group_of[member]] = i


class _Crowding:
    """Folds, then parts, for every group with too many direct children."""

    def __init__(self, graph: Graph, tree: Tree, *, crowded: int, part_items: int,
                 ends: tuple[Sequence[int], Sequence[int]] | None) -> None:
        self.graph, self.tree, self.crowded, self.part_items = graph, tree, crowded, part_items
        if ends is None:
            position = node_positions(graph.nodes)
            ends = ([position[e.src] for e in graph.edges], [position[e.dst] for e in graph.edges])
        self.is_op = list(map(NodeKind.OP.value.__eq__, map(_KIND, graph.nodes)))
        # Only nodes that are no op are ever moved by their neighbours (`_attach`, `_parts`): their edges are
        # picked in C, and a million-op chain makes no list per op.
        not_op = list(map(operator.not_, self.is_op))
        self.neighbours: dict[int, list[int]] = {}
        neighbours = self.neighbours
        src, dst = ends
        for a, b in compress(zip(src, dst, strict=True), map(not_op.__getitem__, src)):
            neighbours.setdefault(a, []).append(b)
        for a, b in compress(zip(src, dst, strict=True), map(not_op.__getitem__, dst)):
            neighbours.setdefault(b, []).append(a)
        self.first: dict[int, int] = {}  # per group: its first node in walk order (`_first_nodes`)

    def run(self) -> None:
        tree = self.tree
        direct_nodes: dict[int, list[int]] = {}
        for i, g in enumerate(tree.node_group):
            direct_nodes.setdefault(g, []).append(i)
        child_groups: dict[int, list[int]] = {}
        for g, p in enumerate(tree.parent):
            if p >= 0:
                child_groups.setdefault(p, []).append(g)
        self.first = self._first_nodes()
        for g in range(len(tree.parent)):  # groups made here are folds and parts: never crowded
            nodes = direct_nodes.get(g, [])
            if len(nodes) + len(child_groups.get(g, [])) <= self.crowded or tree.kind[g] == "roll":
                continue
            left = self._fold(g, nodes)
            groups = [c for c in child_groups.get(g, []) if tree.kind[c] != "fold"]
            groups += [c for c in range(len(tree.parent)) if tree.parent[c] == g and tree.kind[c] == "fold"]
            if len(left) + len(groups) > self.crowded:
                self._parts(g, left, groups)

    def _first_nodes(self) -> dict[int, int]:
        """Per group: the first node in walk order inside it (its place among its siblings), in one pass.

        Folds and parts only move nodes within a group, so these stay true for the groups there are
        now; `_fold` adds its folds'.
        """
        tree, first = self.tree, {}
        for i, g in enumerate(tree.node_group):  # in walk order: the first node to reach a group is its first
            while g != -1 and g not in first:
                first[g] = i
                g = tree.parent[g]
        return first

    # Folds ----------------------------------------------------------------------------------
    def _fold(self, g: int, nodes: list[int]) -> list[int]:
        """Fold repeating runs of `g`'s direct ops; the nodes left directly in `g`."""
        tree, graph = self.tree, self.graph
        ops = [i for i in nodes if self.is_op[i]]
        names = [graph.nodes[i].name for i in ops]
        start = 0
        folded = False
        while start < len(ops):
            period, repeats = _best_period(names, start)
            if repeats == 0:
                start += 1
                continue
            unit = names[start:start + period][::-1]  # walk order is from the output: data flows the other way
            shown = " → ".join(unit) if period <= 4 else f"{unit[0]} → … → {unit[-1]} ({period} ops)"
            fold = tree.add(g, "fold", f"{shown} ×{repeats:,}")
            tree.count[fold] = repeats
            self.first[fold] = min(ops[start:start + period * repeats])
            for k in range(period * repeats):
                node = ops[start + k]
                tree.node_group[node] = fold
                tree.node_instance[node] = repeats - 1 - k // period  # instance 0 is the first run in data flow
            start += period * repeats
            folded = True
        if not folded:
            return nodes
        left = []
        for i in nodes:
            if self.is_op[i] or not self._attach(i, g):
                if tree.node_group[i] == g:
                    left.append(i)
        return left

    def _attach(self, node: int, g: int) -> bool:
        """Move a non-op node into the fold all its neighbours are in (its instance, if one)."""
        tree = self.tree
        places = {(tree.node_group[j], tree.node_instance[j]) for j in self.neighbours.get(node, ())}
        folds = {p[0] for p in places}
        if len(folds) != 1:
            return False
        fold = folds.pop()
        if fold == g or tree.kind[fold] != "fold" or tree.parent[fold] != g:
            return False
        tree.node_group[node] = fold
        tree.node_instance[node] = places.pop()[1] if len(places) == 1 else -1
        self.first[fold] = min(self.first[fold], node)
        return True

    # Parts ----------------------------------------------------------------------------------
    def _parts(self, g: int, nodes: list[int], groups: list[int]) -> None:
        """Slice `g`'s direct ops and boxes into parts by distance from the output, nesting parts as needed."""
        tree = self.tree
        items: list[tuple[int, bool, int]] = [(i, False, i) for i in nodes if self.is_op[i]]
        items += [(self.first.get(c, len(tree.node_group)), True, c) for c in groups]  # a box by its first node
        items.sort()
        level = g
        chunks = [items[k:k + self.part_items] for k in range(0, len(items), self.part_items)]
        parts = []
        for number, chunk in enumerate(chunks, start=1):
            part = tree.add(level, "part", f"part {number:,} of {len(chunks):,} from the output")
            parts.append(part)
            for _, is_group, item in chunk:
                if is_group:
                    tree.parent[item] = part
                else:
                    tree.node_group[item] = part
        for i in nodes:  # saved tensors, leaves: with the first op or box they touch
            if not self.is_op[i]:
                placed = sorted((j for j in self.neighbours.get(i, ()) if tree.node_group[j] != g), key=lambda j: j)
                if placed:
                    tree.node_group[i] = _top_below(tree, tree.node_group[placed[0]], g)
        _nest_parts(tree, g, parts, self.part_items)


def _top_below(tree: Tree, group: int, ancestor: int) -> int:
    """The outermost group under `ancestor` that holds `group`, or `ancestor` if none does."""
    top = group
    while top != -1 and tree.parent[top] != ancestor:
        top = tree.parent[top]
    return top if top != -1 else ancestor


def _nest_parts(tree: Tree, g: int, parts: list[int], per: int) -> None:
    """Put parts into parts of parts until `g` holds at most `per` of them (iteratively)."""
    level = parts
    while len(level) > per:
        above = []
        for k in range(0, len(level), per):
            chunk = level[k:k + per]
            outer = tree.add(g, "part", "")
            for p in chunk:
                tree.parent[p] = outer
            above.append(outer)
        for number, outer in enumerate(above, start=1):
            tree.label[outer] = f"parts {number:,} of {len(above):,} from the output"
        level = above


def _best_period(names: list[str], start: int) -> tuple[int, int]:
    """The period and repetitions of the longest repeating run of names at `start` (0 repetitions: none).

    >>> _best_period(["a", "b", "a", "b", "a", "b", "a", "b", "c"], 0)
    (2, 4)
    """
    best_period, best_repeats = 0, 0
    tried: list[int] = []
    for period in range(1, MAX_PERIOD + 1):
        if start + period * MIN_REPEATS > len(names):
            break
        if any(period % p == 0 for p in tried):
            continue  # a multiple of a repeating period repeats as far
        unit = names[start:start + period]
        repeats = 1
        while names[start + repeats * period:start + (repeats + 1) * period] == unit:
            repeats += 1
        if repeats >= MIN_REPEATS and period * repeats >= MIN_FOLD_OPS:
            tried.append(period)
            if period * repeats > best_period * best_repeats:
                best_period, best_repeats = period, repeats
    return best_period, best_repeats


def initial_open(tree: Tree, *, readable: int = READABLE) -> list[int]:
    """The groups the opening view has open: breadth-first from the root while at most `readable` items show.

    Folds stay closed (one box says what repeats); a roll shows its first instance.
    """
    children: dict[int, list[int]] = {}
    for g, p in enumerate(tree.parent):
        if p >= 0:
            children.setdefault(p, []).append(g)
    direct: dict[tuple[int, int], int] = {}
    for g, inst in zip(tree.node_group, tree.node_instance, strict=True):
        direct[(g, inst)] = direct.get((g, inst), 0) + 1

    def shown(g: int) -> list[int]:
        kids = children.get(g, [])
        return [c for c in kids if tree.instance[c] <= 0] if tree.kind[g] == "roll" else kids

    def items(g: int) -> int:
        nodes = direct.get((g, -1), 0) + (direct.get((g, 0), 0) if tree.kind[g] == "fold" else 0)
        return nodes + len(shown(g))

    opened = [0]
    visible = items(0)
    queue = deque(shown(0))
    while queue:
        g = queue.popleft()
        if tree.kind[g] == "fold":
            continue
        extra = items(g) - 1
        if visible + extra > readable:
            continue
        opened.append(g)
        visible += extra
        queue.extend(shown(g))
    return opened


def open_to_depth(tree: Tree, depth: int) -> list[int]:
    """The groups open when modules deeper than `depth` are closed boxes (1: each top-level module is one box).

    Module boxes above that depth are open, and so are rolls of them (showing their first
    instance); folds and parts stay closed.

    >>> from graphviz_app.model import Edge, ModuleInfo, Node
    >>> modules = (ModuleInfo("enc", "E"), ModuleInfo("enc.l", "L"), ModuleInfo("head", "H"))
    >>> g = Graph((Node("n0", NodeKind.OP, "A", module="enc.l"), Node("n1", NodeKind.OP, "B", module="head")),
    ...           (Edge("n0", "n1"),), modules=modules)
    >>> tree = build_tree(g)
    >>> [tree.module[k] for k in open_to_depth(tree, 1)], [tree.module[k] for k in open_to_depth(tree, 2)]
    ([''], ['', 'enc', 'head'])
    """
    opened = [0]
    for g, kind in enumerate(tree.kind):
        name = tree.module[g]
        if kind in ("module", "roll") and name is not None and module_depth(name) < depth:
            opened.append(g)
    return opened
