"""Check a graph read from JSON field by field: types, ranges, unique ids, edge ends, no cycles."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ..errors import SchemaError
from .annotations import FORWARD_PEAK_ATTR
from .checks import Status, UnitKind, Verdict
from .ranks import PHASES, CollectiveEvent, FsdpUnit, RankInfo
from .records import Edge, EdgeKind, GradInfo, ModuleInfo, Node, NodeKind, TensorInfo

# Reading builds the records first (both the schema-2 and the compact schema-3 reader),
# then `check_graph` walks them once; every problem is a `SchemaError` naming the field,
# e.g. `nodes[3] ('n3').tensor.bytes holds the wrong kind of value: expected a whole number >= 0,
# found '12' (str)`.
__all__ = ["MAX_COUNT", "check_graph"]

MAX_COUNT = 2**62  # sizes, counts and byte totals above this are no tensor's (and overflow int64 sums)

_Check = Callable[[Any], bool]


def _is_int(v: Any) -> bool:
    return type(v) is int and 0 <= v <= MAX_COUNT


def _is_number(v: Any) -> bool:
    return type(v) in (int, float) and math.isfinite(v) and v >= 0


def _is_text(v: Any) -> bool:
    return type(v) is str


def _optional(check: _Check) -> _Check:
    return lambda v: v is None or check(v)


def _tuple_of(check: _Check) -> _Check:
    return lambda v: type(v) is tuple and all(check(x) for x in v)


def _is_scalar(v: Any) -> bool:
    return type(v) in (int, bool, str) or (type(v) is float and math.isfinite(v))


_TEXT = ("text", _is_text)
_OPT_TEXT = ("text or null", _optional(_is_text))
_COUNT = ("a whole number >= 0", _is_int)
_OPT_COUNT = ("a whole number >= 0 or null", _optional(_is_int))
_BOOL = ("true or false", lambda v: type(v) is bool)
_STAT = ("a number (or \"nan\", \"inf\", \"-inf\")", lambda v: type(v) in (int, float))
_VALUES = ("a list of numbers or text, or null", _optional(_tuple_of(_is_scalar)))
_OPT_FLOAT = ("a number (or \"nan\", \"inf\", \"-inf\") or null", _optional(lambda v: type(v) in (int, float)))
_TEXTS = ("a list of text", _tuple_of(_is_text))

# Record type -> (field, (what is expected, check)) for every plain field.
_FIELDS: dict[type, tuple[tuple[str, tuple[str, _Check]], ...]] = {
    TensorInfo: (
        ("name", _OPT_TEXT), ("shape", ("a list of whole numbers >= 0", _tuple_of(_is_int))), ("dtype", _TEXT),
        ("device", _TEXT), ("numel", _COUNT), ("bytes", _COUNT), ("requires_grad", _BOOL), ("values", _VALUES),
        ("storage", _OPT_TEXT), ("freed", _BOOL), ("storage_bytes", _OPT_COUNT), ("given", _BOOL),
        ("sharding", _OPT_TEXT),
    ),
    GradInfo: (
        ("numel", _COUNT), ("norm", _STAT), ("max_abs", _STAT), ("mean_abs", _STAT), ("nan", _COUNT),
        ("inf", _COUNT), ("zero_fraction", _STAT),
        ("values", _VALUES),
    ),
    ModuleInfo: (("name", _TEXT), ("type", _TEXT), ("params", _COUNT), ("param_bytes", _COUNT)),
    Node: (
        ("id", ("non-empty text", lambda v: type(v) is str and v != "")),
        ("kind", ("one of " + ", ".join(k.value for k in NodeKind), lambda v: isinstance(v, NodeKind))),
        ("name", _TEXT),
        ("attrs", ("a list of [name, text] pairs",
                   _tuple_of(lambda p: type(p) is tuple and len(p) == 2 and all(type(x) is str for x in p)))),
        ("module", _OPT_TEXT), ("source", _OPT_TEXT), ("recency", _OPT_COUNT), ("order", _OPT_COUNT),
        ("differentiates", _OPT_TEXT),
        ("output_bytes", ("a list of whole numbers >= 0, or null", _optional(_tuple_of(_is_int)))),
    ),
    Verdict: (
        ("path", _TEXT), ("kind", ("one of " + ", ".join(UnitKind.ALL), lambda v: v in UnitKind.ALL)),
        ("type_name", _TEXT), ("name", _TEXT), ("source", _OPT_TEXT),
        ("status", ("one of " + ", ".join(Status.ALL), lambda v: v in Status.ALL)),
        ("call", _COUNT), ("calls", _COUNT), ("depth", _COUNT), ("parent", _OPT_COUNT), ("culprit", _BOOL),
        ("explained_by", _OPT_TEXT), ("input", _OPT_TEXT), ("ratio", _OPT_FLOAT), ("abs_error", _OPT_FLOAT),
        ("rel_error", _OPT_FLOAT), ("element", _OPT_TEXT), ("reason", _OPT_TEXT), ("checks", _TEXTS),
        ("failed_check", _OPT_TEXT), ("notes", _TEXTS), ("evaluations", _COUNT), ("seconds", _STAT),
    ),
    CollectiveEvent: (
        ("op", _TEXT), ("bytes", _COUNT), ("phase", ("one of " + ", ".join(PHASES), lambda v: v in PHASES)),
        ("live_bytes", _COUNT), ("node", _OPT_TEXT),
    ),
    FsdpUnit: (
        ("name", _TEXT), ("params", _TEXTS), ("param_bytes", ("a list of whole numbers >= 0", _tuple_of(_is_int))),
        ("unsharded_bytes", _COUNT), ("gather_bytes", _COUNT), ("sharded_grad_bytes", _COUNT),
        ("reduce_bytes", _COUNT), ("reshard_after_forward", _BOOL),
    ),
    RankInfo: (
        ("rank", _COUNT), ("world_size", ("a whole number >= 1", lambda v: _is_int(v) and v >= 1)),
        ("strategy", _TEXT), ("grads_in_buckets", _BOOL),
    ),
    Edge: (
        ("src", _TEXT), ("dst", _TEXT),
        ("kind", ("one of " + ", ".join(k.value for k in EdgeKind), lambda v: isinstance(v, EdgeKind))),
        ("output_nr", _COUNT), ("slot", _COUNT),
    ),
}


def _shown(value: Any) -> str:
    text = repr(value)
    return (text if len(text) <= 60 else text[:57] + "...") + f" ({type(value).__name__})"


def _fail(where: str, expected: str, found: Any) -> SchemaError:
    return SchemaError(f"{where} holds the wrong kind of value: expected {expected}, found {_shown(found)}")


def _check_record(record: Any, where: str) -> None:
    for field, (expected, check) in _FIELDS[type(record)]:
        value = getattr(record, field)
        if not check(value):
            raise _fail(f"{where}.{field}", expected, value)
    if type(record) is Node:
        for field, kind in (("tensor", TensorInfo), ("grad", GradInfo)):
            inner = getattr(record, field)
            if inner is not None:
                if type(inner) is not kind:
                    raise _fail(f"{where}.{field}", "an object or null", inner)
                _check_record(inner, f"{where}.{field}")
    if type(record) is Edge and record.grad is not None:
        if type(record.grad) is not GradInfo:
            raise _fail(f"{where}.grad", "an object or null", record.grad)
        _check_record(record.grad, f"{where}.grad")


def _check_nodes(nodes: tuple[Node, ...], where: str) -> set[str]:
    ids: set[str] = set()
    for i, node in enumerate(nodes):
        if type(node) is not Node:
            raise _fail(f"{where}[{i}]", "a node object", node)
        label = f"{where}[{i}]" + (f" ({node.id!r})" if type(node.id) is str else "")
        _check_record(node, label)
        _check_forward_peak(node, label)
        if node.id in ids:
            raise SchemaError(f"{label}.id: the id {node.id!r} is used by an earlier node too; "
                              "each node needs its own id")
        ids.add(node.id)
    return ids


def _check_edges(edges: tuple[Edge, ...], ids: set[str], where: str, *,
                 outside: set[str] | frozenset[str] = frozenset()) -> None:
    for i, edge in enumerate(edges):
        if type(edge) is not Edge:
            raise _fail(f"{where}[{i}]", "an edge", edge)
        _check_record(edge, f"{where}[{i}]")
        for end in ("src", "dst"):
            name = getattr(edge, end)
            if name not in ids and name not in outside:
                raise SchemaError(f"{where}[{i}].{end}: no node has the id {name!r}; an edge must join two "
                                  "nodes of the graph")


def _check_forward_peak(node: Node, label: str) -> None:
    """The forward's peak a run left on an output node is a whole number of bytes, on an output node only."""
    for i, (name, value) in enumerate(node.attrs):
        if name != FORWARD_PEAK_ATTR:
            continue
        if node.kind is not NodeKind.OUTPUT:
            raise SchemaError(f"{label}.attrs[{i}]: {FORWARD_PEAK_ATTR!r} belongs on an output node, found on a "
                              f"node of kind {node.kind.value}")
        if not (value.isascii() and value.isdigit() and int(value) <= MAX_COUNT):
            raise _fail(f"{label}.attrs[{i}] ({FORWARD_PEAK_ATTR!r})", "a whole number of bytes as text", value)


def _find_cycle(nodes: tuple[Node, ...], edges: tuple[Edge, ...]) -> list[str] | None:
    """A cycle of node ids (first == last), or None: an autograd graph never has one. Iterative."""
    after: dict[str, list[str]] = {n.id: [] for n in nodes}
    for e in edges:
        after[e.src].append(e.dst)
    state: dict[str, int] = {}  # 1: on the current path, 2: finished
    for start in after:
        if start in state:
            continue
        path = [start]
        stack = [iter(after[start])]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(after[nxt]))
    return None


def _check_modules(modules: tuple[ModuleInfo, ...], where: str) -> None:
    seen: set[str] = set()
    for i, module in enumerate(modules):
        if type(module) is not ModuleInfo:
            raise _fail(f"{where}[{i}]", "a [name, type, params, bytes] list", module)
        _check_record(module, f"{where}[{i}]")
        if module.name in seen:
            raise SchemaError(f"{where}[{i}]: the module {module.name!r} is listed twice")
        seen.add(module.name)


def _check_texts(values: Any, where: str) -> None:
    if type(values) is not tuple or not all(type(v) is str for v in values):
        bad = next((v for v in values if type(v) is not str), values) if type(values) is tuple else values
        raise _fail(where, "a list of text", bad)


def _check_regions(graph: Any, ids: set[str]) -> None:
    from .regions import CompiledRegion

    names: set[str] = set()
    for r, region in enumerate(graph.regions):
        where = f"regions[{r}]"
        if type(region) is not CompiledRegion:
            raise _fail(where, "a region object", region)
        if type(region.node) is not str or region.node not in ids:
            raise SchemaError(f"{where}.node: no node has the id {region.node!r}; a region belongs to a node")
        if type(region.name) is not str or region.name in names:
            raise _fail(f"{where}.name", "text no other region uses", region.name)
        names.add(region.name)
        inner = _check_nodes(region.nodes, f"{where}.nodes")
        _check_edges(region.edges, inner, f"{where}.edges", outside=ids)
        for field in ("inputs", "outputs"):
            for i, pair in enumerate(getattr(region, field)):
                if not (type(pair) is tuple and len(pair) == 2 and _is_int(pair[0]) and _is_text(pair[1])
                        and pair[1] in inner):
                    raise _fail(f"{where}.{field}[{i}]", "[slot, id of one of the region's nodes]", pair)
        for i, module in enumerate(region.modules):
            if type(module) is not ModuleInfo or not (_is_text(module.name) and _is_text(module.type)):
                raise _fail(f"{where}.modules[{i}]", "[name, type]", module)
        _check_texts(region.notes, f"{where}.notes")


def check_graph(graph: Any) -> None:
    """Raise SchemaError, naming the field, unless every record of `graph` holds what its type says.

    Checks each field's type and range, that node ids are unique, that each edge joins two
    nodes present, that no edge path leads back to where it started, that `nonfinite_origin`
    and each compiled region name a node, that module names are unique, that each check verdict
    holds what its fields say, and that a rank's collectives name nodes present.

    >>> from graphviz_app.model import Graph
    >>> check_graph(Graph((Node("n0", NodeKind.OP, 5),), ()))  # type: ignore[arg-type]
    Traceback (most recent call last):
    ...
    graphviz_app.errors.SchemaError: nodes[0] ('n0').name holds the wrong kind of value: expected text, found 5 (int)
    """
    ids = _check_nodes(graph.nodes, "nodes")
    _check_edges(graph.edges, ids, "edges")
    cycle = _find_cycle(graph.nodes, graph.edges)
    if cycle is not None:
        shown = " -> ".join(cycle[:8]) + (" -> ..." if len(cycle) > 8 else "")
        raise SchemaError(f"edges: they go round in a cycle ({shown}); an autograd graph never does, "
                          "so this file was not written by save(graph, 'g.json') or was changed since")
    _check_texts(graph.notes, "notes")
    if type(graph.truncated) is not bool:
        raise _fail("truncated", "true or false", graph.truncated)
    _check_modules(graph.modules, "modules")
    origin = graph.nonfinite_origin
    if origin is not None and (not _is_text(origin) or origin not in ids):
        raise SchemaError(f"nonfinite_origin: no node has the id {origin!r}")
    _check_regions(graph, ids)
    _check_verdicts(graph.checks)
    _check_rank(graph.rank, ids)


def _check_rank(info: Any, ids: set[str]) -> None:
    if info is None:
        return
    if type(info) is not RankInfo:
        raise _fail("rank", "an object or null", info)
    _check_record(info, "rank")
    if info.rank >= info.world_size:
        raise SchemaError(f"rank.rank: rank {info.rank} is not below world_size {info.world_size}; ranks count "
                          "from 0")
    for field, kind in (("collectives", CollectiveEvent), ("units", FsdpUnit)):
        items = getattr(info, field)
        if type(items) is not tuple:
            raise _fail(f"rank.{field}", "a list of objects", items)
        for i, item in enumerate(items):
            if type(item) is not kind:
                raise _fail(f"rank.{field}[{i}]", "an object", item)
            _check_record(item, f"rank.{field}[{i}]")
    for i, event in enumerate(info.collectives):
        if event.node is not None and event.node not in ids:
            raise SchemaError(f"rank.collectives[{i}].node: no node has the id {event.node!r}; a collective "
                              "names the node running when it was issued, or null")
    for i, unit in enumerate(info.units):
        if len(unit.param_bytes) != len(unit.params):
            raise SchemaError(f"rank.units[{i}].param_bytes: {len(unit.param_bytes)} sizes for "
                              f"{len(unit.params)} parameters; a unit gives one size per parameter")


def _check_verdicts(verdicts: Any) -> None:
    if type(verdicts) is not tuple:
        raise _fail("checks", "a list of check verdicts", verdicts)
    for i, verdict in enumerate(verdicts):
        if type(verdict) is not Verdict:
            raise _fail(f"checks[{i}]", "a check verdict object", verdict)
        _check_record(verdict, f"checks[{i}]")
        if verdict.parent is not None and verdict.parent >= len(verdicts):
            raise SchemaError(f"checks[{i}].parent: there is no verdict {verdict.parent}; a parent is the index "
                              "of another verdict in the list")
