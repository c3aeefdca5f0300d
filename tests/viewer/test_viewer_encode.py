"""The viewer's data as text: orjson writes it, the standard library where orjson cannot; both read back the same."""

from __future__ import annotations

import base64
import gzip
import json
from typing import Any

import pytest
from saved_graphs import every_field_graph

from graphviz_app.viewer.payload import encode, payload


def _decoded(text: str) -> Any:
    return json.loads(gzip.decompress(base64.b64decode(text)))


def test_the_payload_reads_back_as_the_standard_librarys_json_of_it() -> None:
    data = payload(every_field_graph(), title="<script>alert(1)</script>\u2028")
    assert _decoded(encode(data)) == json.loads(json.dumps(data, allow_nan=False))


def test_an_integer_past_64_bits_is_written_exactly() -> None:
    assert _decoded(encode({"bytes": [2**70, -(2**65), 1]})) == {"bytes": [2**70, -(2**65), 1]}


def test_a_value_json_has_no_form_for_is_refused_by_name() -> None:
    with pytest.raises(TypeError, match="cannot write .*object.* into the viewer's data"):
        encode({"a": object()})
