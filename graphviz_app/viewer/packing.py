"""Long columns of the viewer's data packed: a constant as one value, numbers as little-endian bytes in base64.

A traced 1,000,000-op chain's payload is about 180 MB of JSON written as text, and the page spent most of
its first view decompressing and parsing it. Packed, a column of a million indices is a few megabytes of
base64 (one string, which the page's JSON parser copies), read back as a typed array with no parse per
entry. The viewer's decoder (`src/unpack.js`) undoes it; `unpack` is the same in Python (for tests and
readers of a saved file).

Forms, each a JSON object in place of a list of `n` entries (any other list is left as it was)::

    {"$packed": "const", "n": n, "value": v}             every entry v (a number or null)
    {"$packed": "range", "n": n, "start": a, "step": d}   a, a + d, a + 2d, ...
    {"$packed": "int", "n": n, "type": t, "data": b64, "start": a | absent}
        whole numbers as t ("i8", "i16", "i32") little-endian; with "start" the stored numbers are the
        steps from one entry to the next (the first is 0): index columns that mostly count up
    {"$packed": "int", "n": n, "type": "bits", "width": w, "min": m, "data": b64, "start": a | absent}
        as above, numbers m to m + 2**w - 1 as w bit planes (each entry's bit k in plane k, eight
        entries to a byte, the first in the lowest bit; a plane is ceil(n / 8) bytes)
    {"$packed": "num", "n": n, "type": "f32" | "f64", "data": b64, "ints": bool}
        finite numbers (float32 where that holds each exactly; "ints": all are whole)
    {"$packed": "nullable", "n": n, "none": null | 0 | -1, "present": column, "values": column}
        the entries that are not `none` packed on their own; `present`: 1 where an entry is one of them
    {"$packed": "rows", "n": n, "lengths": column, "flat": column}
        a list per entry: their lengths, and their numbers one after another
"""

from __future__ import annotations

import base64
import math
import sys
from array import array
from collections.abc import Mapping
from itertools import accumulate, chain, compress, repeat
from operator import is_not, ne, sub
from typing import Any

__all__ = ["PACKED_VERSION", "PACK_FROM", "PLAIN_VERSION", "pack", "pack_column", "unpack"]

PACK_FROM = 20_000  # a shorter list stays JSON: it parses fast, and a person can read it in the file
# A payload with a packed column says so by its version: a viewer from before packing (a notebook page
# holding an older cell's script) refuses it by name instead of misreading it. Unpacked payloads stay 1.
PACKED_VERSION = 2
PLAIN_VERSION = 1  # viewer/payload.py's PAYLOAD_VERSION
_KEY = "$packed"
_TYPES = (("i8", "b", 127), ("i16", "h", 32_767), ("i32", "i", 2_147_483_647))
_CODES = {name: code for name, code, _ in _TYPES} | {"f32": "f", "f64": "d"}  # array's type codes
_EXACT = 2 ** 53  # whole numbers a float64 holds exactly
_LITTLE = sys.byteorder == "little"


def pack(data: Mapping[str, Any], *, pack_from: int = PACK_FROM) -> dict[str, Any]:
    """`data` (a viewer payload, or a compare file's data holding two in "panes") with its long columns
    packed: the graph's node, tensor, gradient and edge columns, the boxes' columns and each colouring's
    values per node and per box. Everything else is as it was; `data` itself is not changed.

    >>> p = pack({"tree": {"node_group": [1] * 5}, "title": "t"}, pack_from=5)
    >>> p["tree"]["node_group"], p["title"]
    ({'$packed': 'const', 'n': 5, 'value': 1}, 't')
    """
    found = dict(data)
    if isinstance(data.get("panes"), list):
        found["panes"] = [pack(p, pack_from=pack_from) if isinstance(p, Mapping) else p for p in data["panes"]]
    graph = data.get("graph")
    if isinstance(graph, Mapping):
        found["graph"] = {key: _table(value, pack_from) if key in ("nodes", "tensors", "grads", "edges") else value
                          for key, value in graph.items()}
    if isinstance(data.get("tree"), Mapping):
        found["tree"] = _table(data["tree"], pack_from)
    if isinstance(data.get("overlays"), list):
        found["overlays"] = [_overlay(o, pack_from) for o in data["overlays"]]
    if "version" in data and isinstance(graph, Mapping) and _holds_packed(found):
        found["version"] = PACKED_VERSION
    return found


def _holds_packed(payload: Mapping[str, Any]) -> bool:
    """Whether a column of `pack`'s result for one payload is packed."""
    tables = [*(payload["graph"].get(key) for key in ("nodes", "tensors", "grads", "edges")), payload.get("tree"),
              *(payload.get("overlays") or ())]
    return any(isinstance(column, Mapping) and _KEY in column
               for table in tables if isinstance(table, Mapping) for column in table.values())


def _table(columns: Any, pack_from: int) -> Any:
    if not isinstance(columns, Mapping):
        return columns
    return {key: pack_column(value, pack_from=pack_from) for key, value in columns.items()}


def _overlay(overlay: Any, pack_from: int) -> Any:
    if not isinstance(overlay, Mapping):
        return overlay
    return {key: pack_column(value, pack_from=pack_from) if key in ("node", "group") else value
            for key, value in overlay.items()}


def pack_column(column: Any, *, pack_from: int = PACK_FROM) -> Any:
    """`column` in its packed form when it is a list of at least `pack_from` entries that packs (see the
    module's forms), else `column` itself.

    >>> pack_column([0, 1, 3, 3], pack_from=4)
    {'$packed': 'int', 'n': 4, 'type': 'bits', 'width': 2, 'min': 0, 'data': 'Dgw='}
    >>> pack_column(["a", "b"], pack_from=1)
    ['a', 'b']
    """
    if not isinstance(column, list | tuple) or len(column) < max(pack_from, 1):
        return column
    n, first = len(column), column[0]
    if (first is None or type(first) is int or (type(first) is float and math.isfinite(first))) \
            and column[-1] == first and column[n // 2] == first and column.count(first) == n:
        return {_KEY: "const", "n": n, "value": first}  # (1 == 1.0: the same number in JSON)
    found = _ints(column)
    if found is not None:
        return found
    types = set(map(type, column))
    if types <= {int, float}:
        return _numbers(column, types) or column
    if type(None) in types:
        return _nullable(column, None) or column
    lists = sum(map(isinstance, column, repeat((list, tuple)))) if int in types and types <= {int, list, tuple} else 0
    if lists and lists + column.count(0) == n:
        return _nullable(column, 0) or column  # the attributes' column: 0 for none
    if types <= {list, tuple}:
        return _rows(column) or column
    return column


def _ints(column: Any) -> dict[str, Any] | None:
    """Whole numbers in the narrowest type that holds them or their steps; None when they are not all whole
    numbers within 32 bits."""
    found = _narrowest(column)
    if found is None:
        return None
    kind, values = found
    n = len(column)
    if kind == "i8":
        if not values.tobytes().translate(None, b"\x00\x01") and bool in set(map(type, column)):
            return None  # true and false stay booleans (a bool tensor's values)
        return _bytes(values, {_KEY: "int", "n": n})
    # steps: an index column that counts up (edge ends, tensor rows) packs into a byte each, or into a range
    steps = list(map(sub, column, chain((column[0],), column)))
    if steps.count(steps[-1]) == n - 1:
        if steps[-1] == 0:
            return {_KEY: "const", "n": n, "value": column[0]}
        return {_KEY: "range", "n": n, "start": column[0], "step": steps[-1]}
    for narrower, code, _ in _TYPES:
        if _width(narrower) >= _width(kind):
            break
        try:
            stored = array(code, steps)
        except OverflowError:
            continue
        return _bytes(stored, {_KEY: "int", "n": n, "start": column[0]})
    if -1 in column:  # string indices or rows with -1 for none: the others may count up
        some = _nullable(column, -1)
        if some is not None and some["values"].get("type") not in (kind, "f64"):
            return some
    return {_KEY: "int", "n": n, "type": kind, "data": _b64(values)}


def _bytes(values: array[int], form: dict[str, Any]) -> dict[str, Any]:
    """`form` with `values` (a column of bytes, "i8") stored: as bit planes when they span fewer than 16
    values (a kind, a flag, a step of 0 or 1: a quarter to an eighth of the bytes), else as bytes."""
    raw = values.tobytes()
    signed = [v - 256 if v > 127 else v for v in set(raw)]  # the distinct values (a set of bytes: in C)
    lo, hi = min(signed), max(signed)
    if lo == hi and "start" not in form:
        return {_KEY: "const", "n": form["n"], "value": lo}
    if hi - lo >= 16:
        return form | {"type": "i8", "data": _b64(values)}
    width = 1 if hi - lo < 2 else 2 if hi - lo < 4 else 4
    planes = b"".join(_plane(raw, lo, bit, len(values)) for bit in range(width))
    return form | {"type": "bits", "width": width, "min": lo, "data": base64.b64encode(planes).decode("ascii")}


def _plane(raw: bytes, lo: int, bit: int, n: int) -> bytes:
    """Bit `bit` of each (value - lo), eight to a byte, the first value in the lowest bit (in C: each byte
    becomes the digit "0" or "1", and the digits, last first, one binary number)."""
    table = bytes(0x31 if (((v if v < 128 else v - 256) - lo) >> bit) & 1 else 0x30 for v in range(256))
    return int(b"0" + raw.translate(table)[::-1], 2).to_bytes((n + 7) // 8, "little")


def _narrowest(column: Any) -> tuple[str, array[int]] | None:
    """The narrowest of i8, i16, i32 that holds every entry, and the entries in it; None when one is no whole
    number or past 32 bits (array refuses it)."""
    for kind, code, _ in _TYPES:
        try:
            return kind, array(code, column)
        except OverflowError:
            continue
        except TypeError:
            return None
    return None


def _width(kind: str) -> int:
    return {"i8": 1, "i16": 2, "i32": 4}[kind]


def _numbers(column: Any, types: set[type]) -> dict[str, Any] | None:
    """Finite numbers as float32 when that holds each exactly, else float64; None when one is not finite or
    is a whole number past 2**53."""
    if float in types and not all(map(math.isfinite, column)):
        return None
    if int in types and not (-_EXACT <= min(column) and max(column) <= _EXACT):
        return None
    try:
        narrow = array("f", column)
    except OverflowError:
        narrow = array("f")
    exact = narrow.tolist() == list(column)
    values = narrow if exact else array("d", column)
    return {_KEY: "num", "n": len(column), "type": "f32" if exact else "f64", "data": _b64(values),
            "ints": float not in types}


def _nullable(column: Any, none: Any) -> dict[str, Any] | None:
    """The entries that are not `none`, packed on their own, and where they are."""
    present = list(map(ne, column, repeat(none))) if none is not None else list(map(is_not, column, repeat(None)))
    values = list(compress(column, present))
    packed = pack_column(values, pack_from=0)
    if values and packed is values:
        return None
    return {_KEY: "nullable", "n": len(column), "none": none,
            "present": _bytes(array("b", present), {_KEY: "int", "n": len(column)}), "values": packed}


def _rows(column: Any) -> dict[str, Any] | None:
    """A list per entry as their lengths and their numbers one after another; None when the numbers do not
    pack."""
    flat = list(chain.from_iterable(column))
    packed = pack_column(flat, pack_from=0)
    if flat and packed is flat:
        return None
    return {_KEY: "rows", "n": len(column), "lengths": pack_column(list(map(len, column)), pack_from=0),
            "flat": packed}


def _b64(values: array[Any]) -> str:
    if not _LITTLE:
        values = array(values.typecode, values)
        values.byteswap()
    return base64.b64encode(values.tobytes()).decode("ascii")


def unpack(data: Any) -> Any:
    """`data` with every packed column a list again (what `pack` was given, tuples read as lists, as JSON
    reads them).

    >>> unpack(pack({"tree": {"node_group": [3, -1, 7]}}, pack_from=1))
    {'tree': {'node_group': [3, -1, 7]}}
    """
    if isinstance(data, Mapping):
        if _KEY in data:
            return _unpack_column(data)
        found = {key: unpack(value) for key, value in data.items()}
        if found.get("version") == PACKED_VERSION and "graph" in found:
            found["version"] = PLAIN_VERSION
        return found
    if isinstance(data, list) and data and isinstance(data[0], Mapping):
        return [unpack(x) for x in data]
    return data


def _unpack_column(packed: Mapping[str, Any]) -> list[Any]:
    form, n = packed[_KEY], packed["n"]
    if form == "const":
        return [packed["value"]] * n
    if form == "range":
        return list(range(packed["start"], packed["start"] + n * packed["step"], packed["step"])) if packed["step"] \
            else [packed["start"]] * n
    if form == "int":
        kind = packed["type"]
        found = _bits(packed) if kind == "bits" else _numbers_of(_CODES[kind], packed["data"]).tolist()
        return list(accumulate(found, initial=packed["start"]))[1:] if "start" in packed else found
    if form == "num":
        values = _numbers_of(_CODES[packed["type"]], packed["data"]).tolist()
        return list(map(int, values)) if packed["ints"] else values
    if form == "nullable":
        present, values = unpack(packed["present"]), iter(unpack(packed["values"]))
        return [next(values) if there else packed["none"] for there in present]
    if form == "rows":
        lengths, flat = unpack(packed["lengths"]), unpack(packed["flat"])
        ends = list(accumulate(lengths, initial=0))
        return [flat[a:b] for a, b in zip(ends, ends[1:], strict=False)]
    raise ValueError(f"unknown packed column form {form!r}: read it with the graphviz-app that wrote it")


def _bits(packed: Mapping[str, Any]) -> list[int]:
    n, width, data = packed["n"], packed["width"], base64.b64decode(packed["data"])
    size = (n + 7) // 8
    found = [packed["min"]] * n
    for bit in range(width):
        plane = data[bit * size:(bit + 1) * size]
        for i in range(n):
            found[i] += ((plane[i >> 3] >> (i & 7)) & 1) << bit
    return found


def _numbers_of(code: str, text: str) -> array[Any]:
    values = array(code, base64.b64decode(text))
    if not _LITTLE:
        values.byteswap()
    return values
