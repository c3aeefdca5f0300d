"""The graph's JSON form (schema 2; schema 1 still reads): records to JSON-ready values and back."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any, TypeVar

from ..errors import SchemaError
from .records import Edge, EdgeKind, GradInfo, Node, NodeKind, TensorInfo

__all__ = [
    "SCHEMA_VERSION",
    "READABLE_SCHEMAS",
    "check_schema",
    "json_items",
    "node_to_dict",
    "node_from_dict",
    "edge_to_list",
    "edge_from_list",
    "json_number",
    "number_from_json",
    "loads_strict",
    "read_items",
    "STRICT_JSON",
]

_T = TypeVar("_T")

SCHEMA_VERSION = 2
# Versions `Graph.from_dict` reads: 1 lacks modules, sources and gradients; 3 is the
# compact, columnar form of 2 (graphviz_app.model.compact).
READABLE_SCHEMAS = (1, 2, 3)


def check_schema(data: Any) -> None:
    """Raise SchemaError unless `data` is a dict of a schema version this code reads."""
    version = data.get("schema") if isinstance(data, dict) else None
    if type(version) is not int or version not in READABLE_SCHEMAS:  # True == 1 in Python
        *first, last = (str(v) for v in READABLE_SCHEMAS)
        readable = f"{', '.join(first)} or {last}" if first else last
        raise SchemaError(
            f"expected a graph with \"schema\": {readable}, found {version!r}; "
            "was this JSON written by graphviz_app's Graph.to_json()?"
        )


_JSON_CHUNK = 4096
_NONFINITE = ("nan", "inf", "-inf")


def json_number(x: float) -> float | str:
    """A float strict JSON can hold: NaN and infinities as text, as tensor values are.

    >>> json_number(0.5), json_number(float("nan")), json_number(float("-inf"))
    (0.5, 'nan', '-inf')
    """
    if math.isfinite(x):
        return x
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")


def number_from_json(raw: Any) -> float:
    """`json_number` read back.

    Raises:
        ValueError: `raw` is neither a number nor "nan", "inf" or "-inf".
    """
    if isinstance(raw, str) and raw in _NONFINITE:
        return float(raw)
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise ValueError(f"a gradient statistic must be a number, found {raw!r}")
    return raw


def _no_constant(name: str) -> Any:  # noqa: ANN401 - json's hook type
    raise SchemaError(f"{name} is not JSON (a number must be finite); a saved graph writes NaN and "
                      'infinities as the text "nan", "inf", "-inf"')


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise SchemaError(f"the number {text[:40]} is too large for a float; no saved graph holds one")
    return value


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data = dict(pairs)
    if len(data) != len(pairs):
        seen: set[str] = set()
        for twice, _ in pairs:
            if twice in seen:
                break
            seen.add(twice)
        raise SchemaError(f"the key {twice!r} appears twice in one object; JSON read by different readers "
                          "would keep different values, so a saved graph never repeats a key")
    return data


# json.loads keywords that make it read strict JSON (`loads_strict`; the page's reader passes them too).
STRICT_JSON: dict[str, Any] = {"parse_constant": _no_constant, "parse_float": _finite_float,
                               "object_pairs_hook": _unique_keys}


def read_items(raw: Any, field: str, reader: Callable[[Any], _T], item: type | None = None) -> tuple[_T, ...]:
    """`reader` applied to each item of the list `raw` (each of type `item` when given, e.g. dict);
    a failure is a SchemaError naming `field[i]`."""
    if type(raw) is not list:
        raise SchemaError(f"{field} holds the wrong kind of value: expected a list, found {type(raw).__name__}")
    out = []
    names: dict[type, str] = {dict: "an object", list: "a list", str: "text"}
    for i, value in enumerate(raw):
        if item is not None and type(value) is not item:
            raise SchemaError(f"{field}[{i}] holds the wrong kind of value: expected "
                              f"{names.get(item, item.__name__)}, found {type(value).__name__}")
        try:
            out.append(reader(value))
        except SchemaError:
            raise
        except KeyError as e:
            raise SchemaError(f"{field}[{i}] has no {e.args[0]!r} field, which every item needs") from e
        except (TypeError, ValueError, AttributeError, IndexError, OverflowError, RecursionError) as e:
            raise SchemaError(f"{field}[{i}] holds the wrong kind of value ({type(e).__name__}: {e})") from e
    return tuple(out)


def loads_strict(text: str | bytes) -> Any:
    """Parse strict JSON: no NaN or Infinity, no number too large for a float, no key twice in an object.

    Raises:
        SchemaError: the text is not such JSON, nests too deeply, or holds a number of more than
            4,300 digits (the message says which and where).

    >>> loads_strict('{"a": NaN}')
    Traceback (most recent call last):
    ...
    graphviz_app.errors.SchemaError: NaN is not JSON (a number must be finite); ...
    """
    try:
        return json.loads(text, **STRICT_JSON)
    except SchemaError:  # from the hooks: NaN, a key twice
        raise
    except RecursionError as e:  # Python's JSON reader recurses once per level of nesting
        raise SchemaError("the JSON is nested too deeply to be a saved graph (more than the reader's "
                          "1,000 or so levels; a saved graph nests 6)") from e
    except json.JSONDecodeError as e:
        raise SchemaError(f"not JSON: {e}") from e
    except UnicodeDecodeError as e:
        raise SchemaError(f"not UTF-8 text (byte {e.start:,} is not)") from e
    except ValueError as e:  # integers of over 4,300 digits
        raise SchemaError(f"a number in the JSON is too long to read ({e}); no saved graph holds one") from e


def json_items(records: tuple[Any, ...], to_json_ready: Any) -> list[str]:
    """The items of json.dumps([to_json_ready(r) for r in records]), without the brackets, in chunks."""
    parts: list[str] = []
    for start in range(0, len(records), _JSON_CHUNK):
        if start:
            parts.append(", ")
        chunk = [to_json_ready(r) for r in records[start:start + _JSON_CHUNK]]
        parts.append(json.dumps(chunk)[1:-1])
    return parts


def _tensor_to_dict(t: TensorInfo) -> dict[str, Any]:
    return {
        "name": t.name,
        "shape": list(t.shape),
        "dtype": t.dtype,
        "device": t.device,
        "numel": t.numel,
        "bytes": t.bytes,
        "requires_grad": t.requires_grad,
        "values": None if t.values is None else list(t.values),
        "storage": t.storage,
        "freed": t.freed,
        **({} if t.storage_bytes is None else {"storage_bytes": t.storage_bytes}),
        **({"given": True} if t.given else {}),
        **({} if t.sharding is None else {"sharding": t.sharding}),
    }


def _tensor_from_dict(d: dict[str, Any]) -> TensorInfo:
    values = d.get("values")
    return TensorInfo(
        name=d["name"],
        shape=tuple(d["shape"]),
        dtype=d["dtype"],
        device=d["device"],
        numel=d["numel"],
        bytes=d["bytes"],
        requires_grad=d["requires_grad"],
        values=None if values is None else tuple(values),
        storage=d.get("storage"),
        freed=d.get("freed", False),
        storage_bytes=d.get("storage_bytes"),
        given=d.get("given", False),  # types checked once the records are built (model.validation)
        sharding=d.get("sharding"),
    )


def _grad_to_dict(g: GradInfo) -> dict[str, Any]:
    return {
        "numel": g.numel,
        "norm": json_number(g.norm),
        "max_abs": json_number(g.max_abs),
        "mean_abs": json_number(g.mean_abs),
        "nan": g.nan,
        "inf": g.inf,
        "zero_fraction": json_number(g.zero_fraction),
        "values": None if g.values is None else list(g.values),
    }


def _grad_from_dict(d: dict[str, Any] | None) -> GradInfo | None:
    if d is None:
        return None
    values = d.get("values")
    return GradInfo(
        numel=d["numel"],
        norm=number_from_json(d["norm"]),
        max_abs=number_from_json(d["max_abs"]),
        mean_abs=number_from_json(d["mean_abs"]),
        nan=d.get("nan", 0),
        inf=d.get("inf", 0),
        zero_fraction=number_from_json(d.get("zero_fraction", 0.0)),
        values=None if values is None else tuple(values),
    )


# Schema 2 adds "module", "source" and "grad" to a node, and the gradient as a
# sixth element of an edge, only where they are known: a graph traced without
# record() or gradients writes what schema 1 wrote, apart from the version.
def node_to_dict(n: Node) -> dict[str, Any]:
    d: dict[str, Any] = {
        "id": n.id,
        "kind": n.kind.value,
        "name": n.name,
        "tensor": None if n.tensor is None else _tensor_to_dict(n.tensor),
        "attrs": [list(a) for a in n.attrs],
    }
    if n.module is not None:
        d["module"] = n.module
    if n.source is not None:
        d["source"] = n.source
    if n.grad is not None:
        d["grad"] = _grad_to_dict(n.grad)
    if n.recency is not None:
        d["recency"] = n.recency
    if n.order is not None:
        d["order"] = n.order
    if n.differentiates is not None:
        d["differentiates"] = n.differentiates
    if n.output_bytes is not None:
        d["output_bytes"] = list(n.output_bytes)
    return d


def node_from_dict(d: dict[str, Any]) -> Node:
    tensor = d.get("tensor")
    return Node(
        id=d["id"],
        kind=NodeKind(d["kind"]),
        name=d["name"],
        tensor=None if tensor is None else _tensor_from_dict(tensor),
        attrs=tuple((k, v) for k, v in d.get("attrs", ())),
        module=d.get("module"),
        source=d.get("source"),
        grad=_grad_from_dict(d.get("grad")),
        recency=d.get("recency"),
        order=d.get("order"),
        differentiates=d.get("differentiates"),
        output_bytes=None if d.get("output_bytes") is None else tuple(d["output_bytes"]),
    )


def edge_to_list(e: Edge) -> list[Any]:
    row: list[Any] = [e.src, e.dst, e.kind.value, e.output_nr, e.slot]
    if e.grad is not None:
        row.append(_grad_to_dict(e.grad))
    return row


def edge_from_list(row: list[Any]) -> Edge:
    src, dst, kind, output_nr, slot, *rest = row
    if len(rest) > 1:
        raise ValueError(f"an edge has 5 or 6 fields, found {len(row)}")
    return Edge(src, dst, EdgeKind(kind), output_nr, slot, _grad_from_dict(rest[0] if rest else None))
