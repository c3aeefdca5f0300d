"""What the viewer is sent: the compact graph, its boxes, the opening view and the colour overlays, gzipped."""

from __future__ import annotations

import base64
import contextlib
import gc
import gzip
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from itertools import compress
from operator import attrgetter
from typing import Any

import orjson

from ..analysis.distributed import FsdpUnit, RankMemory
from ..analysis.memory import MeasuredMemory
from ..analysis.module_tree import leaf_storages
from ..model import Graph, NodeKind, node_positions, to_compact
from .check import check_overlay
from .memory import memory_view
from .packing import PACK_FROM, PLAIN_VERSION, pack
from .tree import Tree, build_tree, initial_open, open_to_depth

__all__ = ["PAYLOAD_FORMAT", "PAYLOAD_VERSION", "RANKDIRS", "UserOverlays", "payload", "encode", "overlays",
           "user_overlays"]

# A person's own numbers: overlay name -> {node id or module name: value (None: no value)}.
UserOverlays = Mapping[str, Mapping[str, float | None]]

PAYLOAD_FORMAT = "graphviz-app-viewer"
PAYLOAD_VERSION = PLAIN_VERSION  # packing.PACKED_VERSION (2) once encode() packs a column
RANKDIRS = ("TB", "LR", "BT", "RL")


def payload(
    graph: Graph,
    *,
    title: str = "autograd graph",
    rankdir: str = "TB",
    extra_overlays: Sequence[Mapping[str, Any]] = (),
    series: Sequence[Mapping[str, Any]] = (),
    roll: bool = True,
    depth: int | None = None,
    measured: MeasuredMemory | None = None,
    user: UserOverlays | None = None,
    rank: RankMemory | None = None,
    units: Sequence[FsdpUnit] = (),
) -> dict[str, Any]:
    """The viewer's input for `graph` (see the contract in `graphviz_app.viewer`).

    Args:
        graph: the traced graph, whole: the viewer folds it itself.
        title: shown above the graph.
        rankdir: direction of data flow: TB, LR, BT or RL.
        extra_overlays: more colourings, each as `overlays()` returns them.
        series: per-step series (for example live bytes over backward steps).
        roll: roll consecutive identical modules into one box (`layers.0–11 ×12`).
        depth: open on the module boxes down to this depth (`tree.open_to_depth`); None
            (or 0): the viewer opens the deepest module level whose drawing fits its pane with
            labels at least 10 px high (`"open"` then holds `tree.initial_open`, for older viewers).
        measured: a measurement of the step `graph` was traced from (`graphviz_app.memory.measure(...)
            .measured`): its live bytes per backward step are charted beside the predicted ones.
        user: your own numbers, one colouring each (`user_overlays`).
        rank: a rank's figures (`trace_rank_step(...).memory`): its collectives marked on the memory chart
            and in the details of the node that issued them, its DDP buckets and notes under the chart;
            `units`: its FSDP units (`trace_rank_step(...).units`), for the replay of a rank.

    Raises:
        ValueError: `rankdir` is not one of RANKDIRS, `measured` measured another graph, or
            `user` names a node or module the graph does not have, or holds a value that is no number.

    >>> from graphviz_app.model import Node
    >>> p = payload(Graph((Node("n0", NodeKind.OUTPUT, "output"),), ()))
    >>> p["format"], p["open"], p["graph"]["schema"]
    ('graphviz-app-viewer', [0], 3)
    """
    if rankdir not in RANKDIRS:
        raise ValueError(f"rankdir must be one of {', '.join(RANKDIRS)}, got {rankdir!r}")
    with _gc_paused():
        return _payload(graph, title=title, rankdir=rankdir, extra_overlays=extra_overlays, series=series, roll=roll,
                        depth=depth, measured=measured, user=user, rank=rank, units=units)


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """The cyclic GC off while the payload is built (as the tracer's walk does).

    A million-node graph's columns, boxes and overlays are millions of new lists and dicts; each older
    collection they set off walks every one of the graph's records again (a traced 1,000,000-op chain:
    40% of the payload's time). None of them can form a cycle.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _payload(graph: Graph, *, title: str, rankdir: str, extra_overlays: Sequence[Mapping[str, Any]],
             series: Sequence[Mapping[str, Any]], roll: bool, depth: int | None, measured: MeasuredMemory | None,
             user: UserOverlays | None, rank: RankMemory | None = None,
             units: Sequence[FsdpUnit] = ()) -> dict[str, Any]:
    columns = to_compact(graph)  # first: its edge ends serve the boxes and the colourings
    ends = columns["edges"]["src"], columns["edges"]["dst"]
    tree = build_tree(graph, roll=roll, ends=ends)
    mine = user_overlays(graph, tree, user or {})  # checked before the longer work
    memory = memory_view(graph, tree, measured=measured, rank=rank, units=units)
    built = overlays(graph, tree, ends=ends, edge_kinds=columns["edges"]["kind"]) + memory.overlays
    memory.mark(built)
    given = {o.get("key") for o in extra_overlays}
    built += [o for o in check_overlay(graph, tree) if o["key"] not in given]  # a graph carrying check verdicts
    return {
        "format": PAYLOAD_FORMAT,
        "version": PAYLOAD_VERSION,
        "title": title,
        "options": {"rankdir": rankdir, "opening": "given" if depth else "auto"},
        "graph": columns,
        "tree": tree.to_dict(),
        "open": open_to_depth(tree, depth) if depth else initial_open(tree),
        "overlays": built + [dict(o) for o in extra_overlays] + mine,
        "series": memory.series + [dict(s) for s in series],
        "notes": memory.notes,
    }


def encode(data: Mapping[str, Any], *, pack_from: int = PACK_FROM) -> str:
    """JSON, gzipped, in base64: text with no character HTML or a script tag could read as markup.

    The columns of `data` (a payload, or a compare file's data) with at least `pack_from` entries are
    packed (`packing.pack`: a traced 1,000,000-op chain's JSON is 52 MB packed, not 187 MB, and the
    page reads it in a fraction of the time); `packing.unpack` reads them back.

    >>> encode({"a": 1})[:4]
    'H4sI'
    """
    # Level 3: less than half level 6's time for 3% (a traced 300,000-op chain) to 9% (1,000,000 ops) more bytes.
    packed = _json(pack(data, pack_from=pack_from))
    return base64.b64encode(gzip.compress(packed, compresslevel=3, mtime=0)).decode("ascii")


def _json(data: Mapping[str, Any]) -> bytes:
    """The payload as compact JSON: orjson (about 7 times the standard library's speed on a million-node graph's
    columns). orjson refuses what it cannot write exactly (an integer past 64 bits, a key
    that is no text, an unknown type): then the standard library writes it, or says what is wrong. Both
    write tuples as arrays. The payload holds no NaN or infinity (the columns write them as text, the
    colourings as None); orjson would write one as null.
    """
    try:
        return orjson.dumps(data)
    except orjson.JSONEncodeError:
        pass
    # check_circular=False: the payload is a tree of fresh lists (no cycle); the check keeps every one of its
    # millions of lists in a dict while writing.
    return json.dumps(data, separators=(",", ":"), allow_nan=False, default=_no_nan, check_circular=False).encode()


def _no_nan(value: object) -> object:
    raise TypeError(f"cannot write {value!r} into the viewer's data")


def _finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else x


def overlays(graph: Graph, tree: Tree, *, ends: tuple[Sequence[int], Sequence[int]] | None = None,
             edge_kinds: Sequence[int] | None = None) -> list[dict[str, Any]]:
    """The built-in colourings: gradient norm (when traced with gradients) and bytes saved for backward.

    Each holds one value per node (`node`) and per group (`group`; None where
    unknown) and the nodes to flag (`flag`: NaN/Inf gradients). `ends` (each edge's source and
    destination index) and `edge_kinds` (0 data, 1 saved, 2 view) are the compact columns, when the
    caller has them (`payload` does).
    """
    found = []
    nodes = graph.nodes
    groups = len(tree.parent)
    chain = _chains(tree)
    grads = list(map(_GRAD, nodes))
    if any(g is not None for g in grads):
        node = [None if g is None else _finite(g.norm) for g in grads]
        group: list[float | None] = [None] * groups
        for i, value in enumerate(node):
            if value is not None:
                for g in chain[tree.node_group[i]]:
                    old = group[g]
                    group[g] = value if old is None else max(old, value)
        flag = [i for i, g in enumerate(grads) if g is not None and not g.finite]
        found.append({"key": "gradient", "label": "gradient norm", "scale": "log", "unit": "",
                      "node": node, "group": group, "flag": flag})
    if NodeKind.SAVED.value in map(_KIND, nodes):
        if ends is None or edge_kinds is None:
            columns = to_compact(graph)["edges"]
            ends, edge_kinds = (columns["src"], columns["dst"]), columns["kind"]
        found.append(_memory(graph, tree, ends, edge_kinds, chain))
    return found


_GRAD = attrgetter("grad")
_KIND = attrgetter("kind._value_")  # a plain attribute: an enum's `.value` is a Python property
_SAVED = 1  # EdgeKind.SAVED in the compact edge kinds


def _chains(tree: Tree) -> list[list[int]]:
    """Per group: itself and every group around it."""
    chain: list[list[int]] = []
    for g, p in enumerate(tree.parent):
        chain.append([g] + (chain[p] if 0 <= p < g else _up(tree, p)))
    return chain


def _up(tree: Tree, g: int) -> list[int]:
    found = []
    while g != -1:
        found.append(g)
        g = tree.parent[g]
    return found


def _memory(graph: Graph, tree: Tree, ends: tuple[Sequence[int], Sequence[int]], edge_kinds: Sequence[int],
            chain: list[list[int]]) -> dict[str, Any]:
    """Bytes each op's saved activations hold (weights excluded), each storage once per box."""
    weights = leaf_storages(graph)
    nodes = graph.nodes
    src, dst = ends
    node: list[float | None] = [None] * len(nodes)
    seen: list[set[str]] = [set() for _ in tree.parent]
    group: list[float | None] = [None] * len(tree.parent)
    node_group = tree.node_group
    for e in compress(range(len(edge_kinds)), map(_SAVED.__eq__, edge_kinds)):  # the saved edges, picked in C
        s, op = src[e], dst[e]
        t = nodes[s].tensor
        if t is None or t.freed or (t.storage in weights):
            continue
        size = t.storage_bytes if t.storage_bytes is not None else t.bytes
        node[s] = float(size)
        node[op] = (node[op] or 0.0) + size
        key = t.storage or nodes[s].id
        for g in chain[node_group[s]]:
            held = seen[g]
            if key not in held:
                held.add(key)
                group[g] = (group[g] or 0.0) + size
    return {"key": "memory", "label": "bytes saved for backward", "scale": "log", "unit": "bytes",
            "node": node, "group": group, "flag": []}


def user_overlays(graph: Graph, tree: Tree, user: UserOverlays, *,
                  positions: Mapping[str, int] | None = None) -> list[dict[str, Any]]:
    """Your own numbers as colourings: one per name, offered in the colour menu under that name.

    Each maps a node id (`n0`, `n1`, ...) or a module name (`"encoder.layers.0"`) to a number (None: no
    value). A node's value colours the node; a module's colours its box; a box without a value of its own
    shows the sum of its nodes' values. The scale is logarithmic when every value is positive and they
    span more than a hundredfold, else linear. Names and keys are shown as text, never as markup.

    Raises:
        ValueError: a name is not text, a key is neither a node id nor a module name of `graph`, or a
            value is not a finite number (the message names the overlay and the key).

    >>> from graphviz_app.model import Node
    >>> g = Graph((Node("n0", NodeKind.OUTPUT, "output"), Node("n1", NodeKind.OP, "MulBackward0", module="fc")), ())
    >>> t = build_tree(g)
    >>> o = user_overlays(g, t, {"latency_ms": {"n1": 2.5, "fc": 3.0}})[0]
    >>> o["label"], o["node"], o["group"][t.module.index("fc")], o["scale"]
    ('latency_ms', [None, 2.5], 3.0, 'linear')
    """
    if not isinstance(user, Mapping):
        raise ValueError("overlays must be a mapping of name -> {node id or module name: value}, "
                         f"got {type(user).__name__}")
    if not user:
        return []
    index = node_positions(graph.nodes) if positions is None else positions
    boxes: dict[str, list[int]] = {}
    for g, (kind, module) in enumerate(zip(tree.kind, tree.module, strict=True)):
        if kind == "module" and module is not None:
            boxes.setdefault(module, []).append(g)
    chain = _chains(tree)
    found = []
    for name, values in user.items():
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"an overlay's name must be non-empty text, got {name!r}")
        if not isinstance(values, Mapping):
            raise ValueError(f"overlay {name!r}: expected {{node id or module name: value}}, "
                             f"got {type(values).__name__}")
        node, own = _user_values(name, values, index, boxes)
        group: list[float | None] = [None] * len(tree.parent)
        for i, value in enumerate(node):
            if value is not None:
                for g in chain[tree.node_group[i]]:
                    group[g] = (group[g] or 0.0) + value
        for g, value in own.items():
            group[g] = value
        found.append({"key": f"user:{name}", "label": name, "scale": _user_scale(node, group), "unit": "",
                      "node": node, "group": group, "flag": []})
    return found


def _user_values(name: str, values: Mapping[str, float | None], index: Mapping[str, int],
                 boxes: dict[str, list[int]]) -> tuple[list[float | None], dict[int, float]]:
    """One overlay's values per node, and per module box given its own."""
    node: list[float | None] = [None] * len(index)
    own: dict[int, float] = {}
    unknown = []
    for key, value in values.items():
        number = _user_value(name, key, value)
        if isinstance(key, str) and key in index:
            node[index[key]] = number
        elif isinstance(key, str) and key in boxes:
            own.update({g: number for g in boxes[key] if number is not None})
        else:
            unknown.append(key)
    if unknown:
        more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        raise ValueError(f"overlay {name!r}: {', '.join(repr(k) for k in unknown[:5])}{more} is neither a node id "
                         "(n0, n1, ...) nor a module name of this graph; use the ids in graph.nodes or the names "
                         "in graph.modules")
    return node, own


def _user_value(name: str, key: object, value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"overlay {name!r}, {key!r}: the value must be a finite number or None, got {value!r}")
    return float(value)


def _user_scale(node: list[float | None], group: list[float | None]) -> str:
    values = [v for v in node + group if v is not None]
    if values and min(values) > 0 and max(values) > 100 * min(values):
        return "log"
    return "linear"
