"""The difference between two graphs, aligned by module path, op and position (never by node id)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from ..errors import GraphDiffError
from ..model import ANNOTATION_ATTRS, EdgeKind, GradInfo, Graph, Node, NodeKind, human_bytes
from .module_tree import held_bytes, leaf_storages, node_modules

__all__ = ["CHANGE_KINDS", "NodeOnly", "EdgeOnly", "NodeChange", "ModuleDelta", "GraphDiff", "diff",
           "assert_same_graph", "node_keys"]

# What `assert_same_graph(..., ignore=...)` can leave out.
CHANGE_KINDS = ("nodes", "edges", "shape", "dtype", "saved_bytes", "gradients", "attributes")

Key = tuple[object, ...]


@dataclass(frozen=True, slots=True)
class NodeOnly:
    """A node found in one graph only: `side` "a" (removed) or "b" (added), its id there, where it sits."""

    side: str
    id: str
    kind: NodeKind
    name: str
    module: str | None
    key: str


@dataclass(frozen=True, slots=True)
class EdgeOnly:
    """An edge found in one graph only, by the keys of its ends (ids in its own graph)."""

    side: str
    src: str
    dst: str
    kind: EdgeKind
    key: str


@dataclass(frozen=True, slots=True)
class NodeChange:
    """A node of both graphs whose `what` ("shape", "dtype", "saved_bytes", "gradients", "attributes") changed.

    For "attributes", `attribute` names the op's attribute torch saved (`exponent`, `dim`, ...) and
    `before`/`after` are its values; `label` is what a person reads first ("exponent", else `what`).
    """

    what: str
    a: str
    b: str
    name: str
    module: str | None
    before: str
    after: str
    key: str
    attribute: str = ""

    @property
    def label(self) -> str:
        """The attribute's name for an attribute change (`attribute dtype` where it is also a kind of
        change, so the rows stay apart), else what changed ("shape", "dtype", ...)."""
        if not self.attribute:
            return self.what
        return f"attribute {self.attribute}" if self.attribute in CHANGE_KINDS else self.attribute

    def row(self) -> tuple[str, str, str]:
        """(label, before, after): the change as the drawings and the viewers list it."""
        return (self.label, self.before, self.after)


@dataclass(frozen=True, slots=True)
class ModuleDelta:
    """One module's ops and activation bytes (saved tensors beyond parameters) before and after."""

    module: str
    ops_before: int
    ops_after: int
    bytes_before: int
    bytes_after: int

    @property
    def delta(self) -> int:
        return self.bytes_after - self.bytes_before


@dataclass(frozen=True, slots=True)
class GraphDiff:
    """What differs between graph a (before) and graph b (after); `matched` pairs the aligned node ids."""

    only_a: tuple[NodeOnly, ...]
    only_b: tuple[NodeOnly, ...]
    edges_only_a: tuple[EdgeOnly, ...]
    edges_only_b: tuple[EdgeOnly, ...]
    changes: tuple[NodeChange, ...]
    modules: tuple[ModuleDelta, ...]
    matched: tuple[tuple[str, str], ...]

    @property
    def structural(self) -> bool:
        """Whether a node or an edge is in one graph only (what a CI check fails on)."""
        return bool(self.only_a or self.only_b or self.edges_only_a or self.edges_only_b)

    @property
    def empty(self) -> bool:
        """Whether nothing differs at all."""
        return not self.structural and not self.changes

    def counts(self) -> dict[str, int]:
        """How many differences of each kind ("nodes", "edges", "shape", ...)."""
        found = Counter(c.what for c in self.changes)
        return {"nodes": len(self.only_a) + len(self.only_b), "edges": len(self.edges_only_a) + len(self.edges_only_b),
                **{k: found.get(k, 0) for k in CHANGE_KINDS[2:]}}

    def module_table(self) -> str:
        """One row per module whose ops or activation bytes differ: bytes before, after, delta."""
        rows = [("module", "ops before", "ops after", "bytes before", "bytes after", "delta")]
        for m in self.modules:
            if m.delta or m.ops_before != m.ops_after:
                sign = "+" if m.delta > 0 else "-" if m.delta < 0 else ""
                rows.append((m.module, str(m.ops_before), str(m.ops_after), human_bytes(m.bytes_before),
                             human_bytes(m.bytes_after), sign + human_bytes(abs(m.delta))))
        if len(rows) == 1:
            return "no module changed its ops or activation bytes"
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        return "\n".join("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths,
                         strict=True))).rstrip() for r in rows)

    def __str__(self) -> str:
        if self.empty:
            return "the graphs are the same"
        c = self.counts()
        lines = [f"{len(self.only_b)} node(s) added, {len(self.only_a)} removed, {c['edges']} edge(s) in one graph "
                 f"only, {c['shape']} shape, {c['dtype']} dtype, {c['saved_bytes']} saved-bytes, "
                 f"{c['gradients']} gradient and {c['attributes']} op-attribute change(s)"]
        lines += [f"  + {n.key}" for n in self.only_b[:20]]
        lines += [f"  - {n.key}" for n in self.only_a[:20]]
        lines += [f"  ~ {ch.key}: {ch.label} {ch.before} -> {ch.after}" for ch in self.changes[:20]]
        more = len(self.only_a) + len(self.only_b) + len(self.changes) - len(lines) + 1
        if more > 0:
            lines.append(f"  ... and {more} more")
        return "\n".join(lines + ["", self.module_table()])


def node_keys(graph: Graph) -> dict[str, Key]:
    """Node id -> the key it is aligned by: module path, kind, op or name, and position among equals.

    Position counts the nodes of the same module, kind and name in walk order;
    a saved tensor is placed by the op that keeps it, a view's base by its view.

    >>> from graphviz_app.model import Edge
    >>> g = Graph((Node("n0", NodeKind.OP, "MulBackward0", module="fc"), Node("n1", NodeKind.SAVED, "self")),
    ...           (Edge("n1", "n0", EdgeKind.SAVED),))
    >>> node_keys(g)["n1"]
    ('saved', ('op', 'fc', 'MulBackward0', 0), 'self', 0)
    """
    keys: dict[str, Key] = {}
    seen: Counter[Key] = Counter()
    owner: dict[str, str] = {}
    for e in graph.edges:
        if e.kind is not EdgeKind.DATA:
            owner.setdefault(e.src, e.dst)
    later: list[Node] = []
    for n in graph.nodes:
        if n.kind in (NodeKind.SAVED, NodeKind.VIEW_BASE):
            later.append(n)
            continue
        base: Key = (n.kind.value, n.module, n.name)
        if n.kind in (NodeKind.LEAF, NodeKind.OUTPUT) and n.name:
            base = (n.kind.value, None, n.name)  # named by the user or by parameter path
        keys[n.id] = (*base, seen[base])
        seen[base] += 1
    for n in later:
        base = (n.kind.value, keys.get(owner.get(n.id, ""), ("?",)), n.name)
        keys[n.id] = (*base, seen[base])
        seen[base] += 1
    return keys


def _text(key: Key) -> str:
    """A key as people read it: `block.l1 · AddmmBackward0`, `#2` past the first."""
    kind, place, name, position = key
    where = _text(place) + " · " if isinstance(place, tuple) and len(place) == 4 else (
        f"{place} · " if place else "")
    label = name or kind
    return f"{where}{label}{f' #{position}' if position else ''}" + (f" ({kind})" if kind not in ("op",) else "")


def diff(graph_a: Graph, graph_b: Graph, *, grad_rtol: float = 1e-5) -> GraphDiff:
    """Align two graphs and say what changed from `graph_a` to `graph_b`.

    Args:
        graph_a: the graph before.
        graph_b: the graph after.
        grad_rtol: relative change of a gradient's norm, max or mean below which it counts as the same.

    Returns:
        A `GraphDiff`: nodes and edges in one graph only; shape, dtype, saved-bytes,
        gradient-statistic and op-attribute changes of the nodes in both (an op's attributes
        are those torch saved, `exponent 2 -> 3`; what graphviz-app noted on a node,
        `ANNOTATION_ATTRS`, is not compared); and a table by module.

    >>> from graphviz_app.model import Edge
    >>> a = Graph((Node("n0", NodeKind.OUTPUT, "output"), Node("n1", NodeKind.OP, "MulBackward0")), (Edge("n1", "n0"),))
    >>> diff(a, a).empty
    True
    """
    keys_a, keys_b = node_keys(graph_a), node_keys(graph_b)
    id_b = {k: i for i, k in keys_b.items()}
    nodes_a, nodes_b = {n.id: n for n in graph_a.nodes}, {n.id: n for n in graph_b.nodes}
    matched = tuple((i, id_b[k]) for i, k in keys_a.items() if k in id_b)
    in_b = {b for _, b in matched}
    in_a = {a for a, _ in matched}
    only_a = tuple(_only("a", nodes_a[i], keys_a[i]) for i in keys_a if i not in in_a)
    only_b = tuple(_only("b", nodes_b[i], keys_b[i]) for i in keys_b if i not in in_b)
    edges_a, edges_b = _edge_keys(graph_a, keys_a), _edge_keys(graph_b, keys_b)
    edges_only_a = tuple(_edge_only("a", e, k) for k, e in edges_a.items() if k not in edges_b)
    edges_only_b = tuple(_edge_only("b", e, k) for k, e in edges_b.items() if k not in edges_a)
    changes = tuple(c for a, b in matched for c in _changes(nodes_a[a], nodes_b[b], keys_a[a], grad_rtol))
    return GraphDiff(only_a, only_b, edges_only_a, edges_only_b, changes, _modules(graph_a, graph_b), matched)


def _only(side: str, n: Node, key: Key) -> NodeOnly:
    return NodeOnly(side, n.id, n.kind, n.name, n.module, _text(key))


def _edge_keys(graph: Graph, keys: dict[str, Key]) -> dict[tuple[object, ...], tuple[str, str, EdgeKind]]:
    found: dict[tuple[object, ...], tuple[str, str, EdgeKind]] = {}
    for e in graph.edges:
        found.setdefault((keys.get(e.src), keys.get(e.dst), e.kind.value, e.output_nr, e.slot), (e.src, e.dst, e.kind))
    return found


def _edge_only(side: str, ends: tuple[str, str, EdgeKind], key: tuple[object, ...]) -> EdgeOnly:
    src, dst, kind = ends
    src_key, dst_key = key[0], key[1]
    src_text = _text(src_key) if isinstance(src_key, tuple) else src
    text = f"{src_text} -> {_text(dst_key) if isinstance(dst_key, tuple) else dst}"
    return EdgeOnly(side, src, dst, kind, text)


def _changes(a: Node, b: Node, key: Key, grad_rtol: float) -> Iterable[NodeChange]:
    ta, tb = a.tensor, b.tensor
    if ta is not None and tb is not None:
        if ta.shape != tb.shape and not (ta.freed or tb.freed):
            yield NodeChange("shape", a.id, b.id, b.name, b.module, ta.shape_text, tb.shape_text, _text(key))
        if ta.dtype != tb.dtype and not (ta.freed or tb.freed):
            yield NodeChange("dtype", a.id, b.id, b.name, b.module, ta.dtype, tb.dtype, _text(key))
        if a.kind is NodeKind.SAVED and (_held(a), ta.bytes) != (_held(b), tb.bytes):
            yield NodeChange("saved_bytes", a.id, b.id, b.name, b.module, _held_text(a), _held_text(b), _text(key))
    if _grad_differs(a.grad, b.grad, grad_rtol):
        yield NodeChange("gradients", a.id, b.id, b.name, b.module, _grad_text(a.grad), _grad_text(b.grad), _text(key))
    if a.kind is NodeKind.OP and a.attrs != b.attrs:
        after = _op_attributes(b)
        for name, before in _op_attributes(a).items():
            if name in after and after[name] != before:
                yield NodeChange("attributes", a.id, b.id, b.name, b.module, before, after[name], _text(key), name)


def _op_attributes(n: Node) -> dict[str, str]:
    """The attributes torch saved on op `n` (name -> text), without what graphviz-app noted on it.

    An attribute on one side only is not a change of the op: a graph traced with `show_attrs=False`
    has none, so only names on both sides are compared.
    """
    return {k: v for k, v in n.attrs if k not in ANNOTATION_ATTRS}


def _held(n: Node) -> bool:
    return n.tensor is not None and not n.tensor.freed


def _held_text(n: Node) -> str:
    if n.tensor is None or n.tensor.freed:
        return dict(n.attrs).get("state", "freed")
    return human_bytes(n.tensor.bytes)


def _grad_text(g: GradInfo | None) -> str:
    if g is None:
        return "none"
    bad = f", {g.nan} NaN, {g.inf} inf" if g.nan or g.inf else ""
    return f"|grad| {g.norm:.4g}{bad}"


def _grad_differs(a: GradInfo | None, b: GradInfo | None, rtol: float) -> bool:
    if a is None or b is None:
        return (a is None) != (b is None)
    if (a.numel, a.nan, a.inf) != (b.numel, b.nan, b.inf):
        return True
    return any(not math.isclose(x, y, rel_tol=rtol, abs_tol=1e-12)
               for x, y in ((a.norm, b.norm), (a.max_abs, b.max_abs), (a.mean_abs, b.mean_abs),
                            (a.zero_fraction, b.zero_fraction)))


def _module_rows(graph: Graph) -> dict[str, tuple[int, int]]:
    """Module -> (ops, activation bytes), submodules included; nodes outside modules under "(no module)"."""
    modules_of = node_modules(graph)
    weights = leaf_storages(graph)
    ops: Counter[str] = Counter()
    storages: dict[str, dict[str, int]] = {}
    for n in graph.nodes:
        own = modules_of.get(n.id)
        names = _with_parents(own)
        if n.kind is NodeKind.OP:
            for m in names:
                ops[m] += 1
        t = n.tensor
        if n.kind is NodeKind.SAVED and t is not None and not t.freed and t.storage not in weights:
            for m in names:
                held = storages.setdefault(m, {})
                key = t.storage or n.id
                held[key] = max(held.get(key, 0), held_bytes(t))
    return {m: (ops.get(m, 0), sum(storages.get(m, {}).values())) for m in set(ops) | set(storages)}


def _with_parents(module: str | None) -> list[str]:
    if module is None:
        return ["(no module)"]
    if not module:
        return ["(root)"]
    parts = module.split(".")
    return ["(root)"] + [".".join(parts[: i + 1]) for i in range(len(parts))]


def _modules(a: Graph, b: Graph) -> tuple[ModuleDelta, ...]:
    rows_a, rows_b = _module_rows(a), _module_rows(b)
    order = sorted(set(rows_a) | set(rows_b), key=_tree_order)
    deltas = []
    for m in order:
        (ops_a, bytes_a), (ops_b, bytes_b) = rows_a.get(m, (0, 0)), rows_b.get(m, (0, 0))
        deltas.append(ModuleDelta(m, ops_a, ops_b, bytes_a, bytes_b))
    return tuple(deltas)


def _tree_order(module: str) -> tuple[int, list[tuple[int, int, str]]]:
    """Root first, then modules by path with numbers in numeric order, "(no module)" last.

    >>> sorted(["block", "(no module)", "10", "2", "(root)"], key=_tree_order)
    ['(root)', '2', '10', 'block', '(no module)']
    """
    if module == "(root)":
        return (0, [])
    if module == "(no module)":
        return (2, [])
    return (1, [(0, int(p), "") if p.isascii() and p.isdigit() else (1, 0, p) for p in module.split(".")])


def assert_same_graph(graph_a: Graph, graph_b: Graph, *, ignore: Iterable[str] = ()) -> None:
    """Raise `GraphDiffError` (an AssertionError) saying what differs, unless only what `ignore` names does.

    Args:
        graph_a: the expected graph.
        graph_b: the graph found.
        ignore: kinds of difference to accept, from `CHANGE_KINDS`: "nodes", "edges",
            "shape", "dtype", "saved_bytes", "gradients", "attributes".

    Raises:
        GraphDiffError: the graphs differ; its message is the diff (`str(GraphDiff)`), `.diff` the records.
        ValueError: `ignore` names a kind that is not one of `CHANGE_KINDS`.

    >>> from graphviz_app.model import Edge
    >>> a = Graph((Node("n0", NodeKind.OUTPUT, "output"), Node("n1", NodeKind.OP, "MulBackward0")), (Edge("n1", "n0"),))
    >>> assert_same_graph(a, a)
    """
    skipped = frozenset([ignore] if isinstance(ignore, str) else ignore)
    unknown = sorted(skipped - set(CHANGE_KINDS))
    if unknown:
        raise ValueError(f"ignore names {unknown}, expected some of {', '.join(CHANGE_KINDS)}")
    found = diff(graph_a, graph_b)
    left = {k: v for k, v in found.counts().items() if v and k not in skipped}
    if left:
        summary = ", ".join(f"{v} {k}" for k, v in left.items())
        raise GraphDiffError(f"the graphs differ ({summary}; ignored: {', '.join(sorted(skipped)) or 'nothing'}):\n"
                             f"{found}", found)
