"""The graph's compact JSON form (schema 3): one array per field, strings in one table; lossless.

Schema 2 writes one object per node, repeating every key, dtype and device; a
100,000-node graph is about 60 MB of it. Schema 3 writes the same records as
columns (`nodes.kind[i]` is node i's kind), every string once in `strings`
(columns hold its index, -1 for None), so the text is a few times smaller and
compresses well: what the viewer embeds in an HTML file. `Graph.from_dict`
reads it as it reads schemas 1 and 2.

Layout (all columns of one table have the same length)::

    {"schema": 3, "strings": [...],
     "nodes": {"id": [s] | null (ids are n0, n1, ...), "kind": [s], "name": [s], "module": [s],
               "source": [s], "recency": [int | null], "attrs": [[s, s, ...] | 0], "tensor": [t | -1],
               "grad": [g | -1], "order": [int | null] and "differentiates": [s] (only when known)},
     "tensors": {"name": [s], "shape": [[int, ...]], "dtype": [s], "device": [s], "numel": [int],
                 "bytes": [int], "requires_grad": [0 | 1], "values": [[...] | null], "storage": [s],
                 "freed": [0 | 1], "storage_bytes": [int | null], "sharding": [s] (only when any is sharded)},
     "grads": {"numel", "norm", "max_abs", "mean_abs", "nan", "inf", "zero_fraction", "values"}
               (norm, max_abs, mean_abs, zero_fraction: numbers, or "nan", "inf", "-inf" as text),
     "edges": {"src": [node index], "dst": [node index], "kind": [0 data | 1 saved | 2 view],
               "output_nr": [int], "slot": [int], "grad": [g | -1]},
     "notes": [...], "truncated": false, "modules": [[name, type, params, param_bytes]],
     "nonfinite_origin": node index | null, "regions": [region, ...] (compiled regions, schema 2's form),
     "checks": [verdict, ...] and "rank": {...} (`model.ranks`; node ids, not indices), as schema 2 writes them}
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Iterable, Mapping, Sequence
from itertools import accumulate, repeat
from operator import attrgetter, mul, sub
from typing import Any

from ..errors import SchemaError
from .checks import verdict_from_dict, verdict_to_dict
from .ranks import rank_from_dict, rank_to_dict
from .records import Edge, EdgeKind, GradInfo, ModuleInfo, Node, NodeKind, Scalar, TensorInfo
from .regions import region_from_dict, region_to_dict
from .schema import json_number, number_from_json

__all__ = ["COMPACT_SCHEMA", "to_compact", "compact_fields", "node_positions"]

COMPACT_SCHEMA = 3
_EDGE_KINDS = (EdgeKind.DATA, EdgeKind.SAVED, EdgeKind.VIEW)
_GRAD_FIELDS = ("numel", "norm", "max_abs", "mean_abs", "nan", "inf", "zero_fraction", "values")
_TENSOR_FIELDS = ("name", "shape", "dtype", "device", "numel", "bytes", "requires_grad", "values",
                  "storage", "freed", "storage_bytes")
_EDGE_KIND_INDEX = {kind.value: i for i, kind in enumerate(_EDGE_KINDS)}
_IS_NOT_NONE = functools.partial(operator.is_not, None)
_AFTER_N = operator.itemgetter(slice(1, None))  # "n17" -> "17"


class _Strings(dict[str | None, int]):
    """The string table: each distinct string once, columns hold its index (-1 for None).

    `s[text]` is a dict lookup (in C); only a string seen for the first time calls `__missing__`. A
    million-node graph looks up several million strings, so this is most of writing its columns.
    """

    def __init__(self) -> None:
        super().__init__({None: -1})

    def __missing__(self, text: str | None) -> int:
        found = self[text] = len(self) - 1  # None's entry is not a string
        return found

    def table(self) -> list[str]:
        return [text for text in self if text is not None]


def _grad_columns(grads: list[GradInfo]) -> dict[str, list[Any]]:
    return {
        "numel": [g.numel for g in grads], "norm": [json_number(g.norm) for g in grads],
        "max_abs": [json_number(g.max_abs) for g in grads], "mean_abs": [json_number(g.mean_abs) for g in grads],
        "nan": [g.nan for g in grads], "inf": [g.inf for g in grads],
        "zero_fraction": [json_number(g.zero_fraction) for g in grads],
        "values": [None if g.values is None else list(g.values) for g in grads],
    }


def node_positions(nodes: Sequence[Node]) -> dict[str, int]:
    """Each node id's place in `nodes` (a repeated id: its first place); built in C, no Python per node.

    >>> node_positions((Node("n0", NodeKind.OUTPUT, "output"), Node("a", NodeKind.OP, "MulBackward0")))
    {'n0': 0, 'a': 1}
    """
    ids = list(map(attrgetter("id"), nodes))
    found = dict(zip(ids, range(len(ids)), strict=True))
    if len(found) != len(ids):  # a repeated id: dict() keeps the last place, a scan finds the first
        found = {}
        for i, node_id in enumerate(ids):
            found.setdefault(node_id, i)
    return found


def to_compact(graph: Any, *, positions: Mapping[str, int] | None = None) -> dict[str, Any]:
    """`graph` (a `Graph`) as schema-3 columns; `Graph.from_dict` reads them back exactly.

    `positions` (node id -> index, `node_positions(graph.nodes)`): the caller's map, else one is built when
    the ids are not n0, n1, ... in order (those are read from the ids).
    Each column is made by `map` over the records (attribute getters and dict lookups in C): a
    million-node graph has tens of millions of column entries, and a Python loop per entry was most
    of the time of saving it.

    >>> from graphviz_app.model import Graph, Node, NodeKind, Edge
    >>> g = Graph((Node("n0", NodeKind.OUTPUT, "output"), Node("n1", NodeKind.OP, "MulBackward0")),
    ...           (Edge("n1", "n0"),))
    >>> data = to_compact(g)
    >>> nodes, edges, strings = data["nodes"], data["edges"], list(data["strings"])
    >>> nodes["kind"], strings[:3], edges["src"]
    ([0, 1], ['output', 'op', 'MulBackward0'], [1])
    >>> Graph.from_dict(data) == g
    True
    """
    s = _Strings()

    def strings(records: Sequence[Any], field: str) -> list[int]:  # a text field's column of string indices
        return list(map(s.__getitem__, map(attrgetter(field), records)))

    def plain(records: Sequence[Any], field: str) -> list[Any]:
        return list(map(attrgetter(field), records))

    nodes: tuple[Node, ...] = graph.nodes
    ids = plain(nodes, "id")
    plain_ids = all(map(str.__eq__, ids, map("n{}".format, range(len(ids)))))
    tensor_col, tensors = _index_column(plain(nodes, "tensor"))
    grad_col, grads = _index_column(plain(nodes, "grad"))
    node_cols: dict[str, Any] = {
        "id": None if plain_ids else list(map(s.__getitem__, ids)),
        "kind": strings(nodes, "kind._value_"),  # an enum's `_value_` is a plain attribute, `.value` a property
        "name": strings(nodes, "name"),
        "module": strings(nodes, "module"),
        "source": strings(nodes, "source"),
        "recency": plain(nodes, "recency"),
        "attrs": _attrs_column(map(attrgetter("attrs"), nodes), s),
        "tensor": tensor_col,
        "grad": grad_col,
    }
    orders = plain(nodes, "order")
    if orders.count(None) != len(orders):  # orders of derivatives: written only when known
        node_cols["order"] = orders
        node_cols["differentiates"] = strings(nodes, "differentiates")
    tensor_cols: dict[str, list[Any]] = {
        # shapes and values stay the records' tuples: JSON writes a tuple as an array, and no list is made
        "name": strings(tensors, "name"), "shape": plain(tensors, "shape"),
        "dtype": strings(tensors, "dtype"), "device": strings(tensors, "device"),
        "numel": plain(tensors, "numel"), "bytes": plain(tensors, "bytes"),
        "requires_grad": list(map(int, map(attrgetter("requires_grad"), tensors))),
        "values": plain(tensors, "values"), "storage": strings(tensors, "storage"),
        "freed": list(map(int, map(attrgetter("freed"), tensors))),
        "storage_bytes": plain(tensors, "storage_bytes"),
    }
    shardings = plain(tensors, "sharding")
    if shardings.count(None) != len(shardings):  # a rank's DTensor shards: written only when present
        tensor_cols["sharding"] = list(map(s.__getitem__, shardings))
    edges: tuple[Edge, ...] = graph.edges
    edge_grad_col, edge_grad_list = _index_column(plain(edges, "grad"), start=len(grads))
    src, dst = plain(edges, "src"), plain(edges, "dst")
    places = (_plain_places(src, ids), _plain_places(dst, ids)) if plain_ids and positions is None else (None, None)
    position: Mapping[str, int] = {}
    if places[0] is None or places[1] is None or graph.nonfinite_origin is not None:
        position = node_positions(nodes) if positions is None else positions
    edge_cols = {
        "src": places[0] if places[0] is not None else list(map(position.__getitem__, src)),
        "dst": places[1] if places[1] is not None else list(map(position.__getitem__, dst)),
        "kind": list(map(_EDGE_KIND_INDEX.__getitem__, map(attrgetter("kind._value_"), edges))),
        "output_nr": plain(edges, "output_nr"), "slot": plain(edges, "slot"), "grad": edge_grad_col,
    }
    origin = graph.nonfinite_origin
    return {
        "schema": COMPACT_SCHEMA,
        "strings": s.table(),
        "nodes": node_cols,
        "tensors": tensor_cols,
        "grads": _grad_columns(grads + edge_grad_list),
        "edges": edge_cols,
        "notes": list(graph.notes),
        "truncated": graph.truncated,
        "modules": [[m.name, m.type, m.params, m.param_bytes] for m in graph.modules],
        "nonfinite_origin": None if origin is None else position.get(origin, -1),
        **({"regions": [region_to_dict(r) for r in graph.regions]} if graph.regions else {}),
        **({"checks": [verdict_to_dict(v) for v in graph.checks]} if graph.checks else {}),
        **({"rank": rank_to_dict(graph.rank)} if graph.rank is not None else {}),
    }


def _plain_places(ends: list[str], ids: list[str]) -> list[int] | None:
    """The places of edge ends in a graph whose ids are n0, n1, ... in order, read from the ids themselves
    (a million-entry dict's lookups and its building are a second of a million-op chain's save); None
    where an end is no node's id (the caller looks it up, and says which).

    >>> _plain_places(["n1", "n0"], ["n0", "n1"]), _plain_places(["n2"], ["n0", "n1"]), _plain_places(["x"], ["n0"])
    ([1, 0], None, None)
    """
    try:
        places = list(map(int, map(_AFTER_N, ends)))
    except ValueError:
        return None
    if places and (min(places) < 0 or max(places) >= len(ids)):
        return None
    # exactly the node's id ("n1_0" and "n 5" read as numbers too): the same object, or equal text
    return places if all(map(operator.eq, map(ids.__getitem__, places), ends)) else None


def _index_column(items: Sequence[Any], start: int = 0) -> tuple[list[int], list[Any]]:
    """Each item's place among the items that are not None (counting from `start`; -1 for None), and those items.

    In C: with `there` 1 or 0 and `count` the running count of items there, the place is there * (start +
    count) - 1.

    >>> _index_column(["a", None, "b"], start=5)
    ([5, -1, 6], ['a', 'b'])
    """
    present = list(filter(None, items))  # records are never false (no __len__ or __bool__)
    if len(present) == len(items):
        return list(range(start, start + len(items))), present
    there = list(map(_IS_NOT_NONE, items))
    return list(map(sub, map(mul, there, map(start.__add__, accumulate(there))), repeat(1))), present


def _attrs_column(attrs: Iterable[tuple[tuple[str, str], ...]], s: _Strings) -> list[list[int] | int]:
    """Each node's attributes as string indices (0: none); equal attribute sets share one list (a long
    loop repeats the same few, so each is looked up once)."""

    class _Sets(dict[tuple[tuple[str, str], ...], Any]):
        def __missing__(self, pairs: tuple[tuple[str, str], ...]) -> list[int]:
            found = self[pairs] = [s[text] for pair in pairs for text in pair]
            return found

    return list(map(_Sets({(): 0}).__getitem__, attrs))


def _values(raw: Any) -> tuple[Scalar, ...] | None:
    return None if raw is None else tuple(raw)


def compact_fields(data: dict[str, Any]) -> dict[str, Any]:
    """The fields of the `Graph` that schema-3 columns describe (`Graph.from_dict` builds it).

    Raises:
        SchemaError: `data` is not a well-formed schema-3 graph (the message names the field).
    """
    try:
        return _read(data)
    except SchemaError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, OverflowError, RecursionError) as e:
        raise SchemaError(f"malformed compact graph JSON (schema 3): {type(e).__name__}: {e}; "
                          "write it again with graphviz_app's to_compact()") from e


def _flag(raw: Any, field: str) -> bool:
    """A 0 or 1 column entry as a bool; anything else ("no", 2, 0.5) is refused."""
    if type(raw) is not int or raw not in (0, 1):
        raise ValueError(f"tensors.{field} holds {raw!r}; it must be 0 or 1")
    return bool(raw)


def _text(strings: list[Any], index: int) -> str | None:
    if index == -1:
        return None
    if type(index) is not int or index < -1:
        raise ValueError(f"a string index must be a whole number >= -1, found {index!r}")
    value = strings[index]
    if not isinstance(value, str):
        raise ValueError(f"strings[{index}] is not text: {value!r}")
    return value


def _read(data: dict[str, Any]) -> dict[str, Any]:
    strings = data["strings"]
    if not isinstance(strings, list):
        raise ValueError("\"strings\" must be a list")

    def text(index: int) -> str | None:
        return _text(strings, index)

    def required(index: int, field: str) -> str:
        value = text(index)
        if value is None:
            raise ValueError(f"{field} must be text, found none")
        return value

    tc = data["tensors"]
    shardings = tc.get("sharding") or [-1] * len(tc["dtype"])
    tensors = [
        TensorInfo(
            name=text(tc["name"][i]), shape=tuple(tc["shape"][i]),
            dtype=required(tc["dtype"][i], "a tensor's dtype"), device=required(tc["device"][i], "a tensor's device"),
            numel=tc["numel"][i], bytes=tc["bytes"][i], requires_grad=_flag(tc["requires_grad"][i], "requires_grad"),
            values=_values(tc["values"][i]), storage=text(tc["storage"][i]), freed=_flag(tc["freed"][i], "freed"),
            storage_bytes=tc["storage_bytes"][i], sharding=text(shardings[i]),
        )
        for i in range(len(tc["dtype"]))
    ]
    gc = data["grads"]
    grads = [
        GradInfo(numel=gc["numel"][i], norm=number_from_json(gc["norm"][i]),
                 max_abs=number_from_json(gc["max_abs"][i]), mean_abs=number_from_json(gc["mean_abs"][i]),
                 nan=gc["nan"][i], inf=gc["inf"][i],
                 zero_fraction=number_from_json(gc["zero_fraction"][i]), values=_values(gc["values"][i]))
        for i in range(len(gc["numel"]))
    ]
    nc = data["nodes"]
    count = len(nc["kind"])
    ids = [f"n{i}" for i in range(count)] if nc.get("id") is None else [required(i, "a node id") for i in nc["id"]]
    orders = nc.get("order") or [None] * count
    differentiates = nc.get("differentiates") or [-1] * count
    nodes = []
    for i in range(count):
        attrs = nc["attrs"][i] or []
        pairs = tuple((required(attrs[j], "an attribute"), required(attrs[j + 1], "an attribute"))
                      for j in range(0, len(attrs) - 1, 2))
        tensor, grad = nc["tensor"][i], nc["grad"][i]
        nodes.append(Node(
            id=ids[i], kind=NodeKind(text(nc["kind"][i])), name=required(nc["name"][i], "a node name"),
            tensor=None if tensor == -1 else tensors[tensor], attrs=pairs, module=text(nc["module"][i]),
            source=text(nc["source"][i]), grad=None if grad == -1 else grads[grad], recency=nc["recency"][i],
            order=orders[i], differentiates=text(differentiates[i]),
        ))
    ec = data["edges"]
    edges = []
    for i in range(len(ec["src"])):
        src, dst, kind, grad = ec["src"][i], ec["dst"][i], ec["kind"][i], ec["grad"][i]
        if type(src) is not int or type(dst) is not int or min(src, dst) < 0 or type(kind) is not int or kind < 0:
            raise ValueError(f"edge {i} names node {src!r} -> {dst!r} of kind {kind!r}")
        edges.append(Edge(ids[src], ids[dst], _EDGE_KINDS[kind], ec["output_nr"][i], ec["slot"][i],
                          None if grad == -1 else grads[grad]))
    origin = data.get("nonfinite_origin")
    return dict(
        nodes=tuple(nodes), edges=tuple(edges), notes=tuple(data.get("notes", ())),
        truncated=data.get("truncated", False),  # types checked once the records are built (validation)
        modules=tuple(ModuleInfo(*m) for m in data.get("modules", ())),
        nonfinite_origin=None if origin is None or origin == -1 else ids[origin],
        regions=tuple(region_from_dict(r) for r in data.get("regions", ())),
        checks=tuple(verdict_from_dict(v) for v in data.get("checks", ())),
        rank=rank_from_dict(data["rank"]) if "rank" in data else None,
    )
