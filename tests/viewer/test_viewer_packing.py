"""The payload's long columns packed (viewer/packing.py): read back exactly, and only where they pack."""

from __future__ import annotations

import base64
import gzip
import json
from typing import Any

import pytest
from viewer_support import chain_graph, module_graph, with_order

from graphviz_app.viewer.compare import compare_payload
from graphviz_app.viewer.packing import PACK_FROM, PACKED_VERSION, pack, pack_column, unpack
from graphviz_app.viewer.payload import encode, payload


def _as_json(data: Any) -> Any:
    return json.loads(json.dumps(data))


def _decoded(text: str) -> Any:
    return json.loads(gzip.decompress(base64.b64decode(text)))


@pytest.mark.parametrize("graph", [with_order(module_graph(3)), chain_graph(300)], ids=["modules", "chain"])
def test_a_payload_packed_to_the_last_column_reads_back_as_it_was(graph: Any) -> None:
    data = payload(graph)
    packed = _as_json(pack(data, pack_from=1))
    assert "$packed" in packed["graph"]["edges"]["src"] and "$packed" in packed["tree"]["node_group"]
    assert unpack(packed) == _as_json(data)


def test_the_chain_columns_take_their_compact_forms() -> None:
    packed = pack(payload(chain_graph(300)), pack_from=1)
    edges, nodes, tensors = (packed["graph"][k] for k in ("edges", "nodes", "tensors"))
    assert edges["src"] == {"$packed": "range", "n": 301, "start": 1, "step": 1}  # n1 -> n0, n2 -> n1, ...
    assert edges["output_nr"] == {"$packed": "const", "n": 301, "value": 0}
    assert nodes["tensor"]["$packed"] == "range"
    assert tensors["shape"]["$packed"] == "rows"
    assert (nodes["kind"]["type"], nodes["kind"]["width"]) == ("bits", 2)  # output, op, leaf: two bits a node


@pytest.mark.parametrize(("column", "form"), [
    ([None, 3, None, 4, 5], "nullable"),  # a backward order: none for tensors
    ([0, [8, 10], 0, [11, 12]], "nullable"),  # attributes: 0 for none
    ([(2,), (2, 3), ()], "rows"),  # shapes
    ([None, (1.5, 2.25), (0.1,)], "nullable"),  # values: float64 where float32 would round
    ([0, 40_000, -70_000], "int"),
    ([5, -3, 100, -100], "int"),  # bytes
    ([7, 8, 7, 9, 10], "int"),  # bit planes from 7
    ([-128, -113, -120, -125, -127, -128, -114, -115, -116, -117, -118], "int"),  # 4 planes from the lowest byte
    ([*range(0, 70_000, 3), 5], "int"),  # steps of 3 and one back: bytes of steps
    ([2 ** 40, 1], "num"),  # past 32 bits: float64 holds it exactly
    ([1.0, None, None], "nullable"),
])
def test_each_kind_of_column_packs_and_reads_back(column: list[Any], form: str) -> None:
    packed = pack_column(column, pack_from=1)
    assert packed["$packed"] == form
    assert unpack(_as_json(packed)) == _as_json(column)


@pytest.mark.parametrize("column", [
    ["a", "b"],  # text
    [1, "x"],
    [float("nan"), 1.0],  # not finite: JSON would refuse it anyway, the payload holds none
    [2 ** 60, 1],  # past 2**53: float64 would round it
    [[1, "x"], None],  # a list of mixed values
    [[True], [False]],  # booleans stay booleans
    [5, 0, [1]],  # not all non-lists are one "none"
], ids=["text", "mixed", "nan", "huge", "mixed-rows", "bools", "two-nones"])
def test_a_column_that_does_not_pack_is_left_as_it_was(column: list[Any]) -> None:
    assert pack_column(column, pack_from=1) is column


def test_short_columns_stay_json_and_long_ones_are_packed_in_the_file() -> None:
    small = payload(chain_graph(50))
    assert _decoded(encode(small)) == _as_json(small)  # readers of a small file see the columns as before
    big = payload(chain_graph(PACK_FROM + 10))
    read = _decoded(encode(big))
    assert read["graph"]["edges"]["src"]["$packed"] == "range"
    assert unpack(read) == _as_json(big)


def test_a_compare_files_panes_are_packed_and_its_alignment_is_not() -> None:
    data = compare_payload(with_order(module_graph(3)), module_graph(2), labels=("a", "b"))
    read = _decoded(encode(data, pack_from=1))
    assert all("$packed" in pane["graph"]["nodes"]["kind"] for pane in read["panes"])
    assert read["match"] == _as_json(data["match"])  # the compare view reads it as it was
    assert unpack(read) == _as_json(data)


def test_an_unknown_form_is_refused_with_what_to_do() -> None:
    with pytest.raises(ValueError, match="unknown packed column form 'zip'.*graphviz-app that wrote it"):
        unpack({"x": {"$packed": "zip", "n": 1}})


def test_a_payload_says_version_2_once_a_column_is_packed_and_reads_back_as_version_1() -> None:
    data = payload(chain_graph(300))
    assert _decoded(encode(data))["version"] == 1  # nothing packed below PACK_FROM: the plain form
    packed = _decoded(encode(data, pack_from=1))
    assert packed["version"] == PACKED_VERSION == 2  # a viewer from before packing refuses it by name
    assert unpack(packed)["version"] == 1
