"""The page's link parameters and devices read digits strictly: `1_0`, `٣` and `²` are ignored or refused, said so."""

from __future__ import annotations

import pytest

from graphviz_app.expr.errors import ExprError
from graphviz_app.web.urlstate import Options, from_query


@pytest.mark.parametrize("raw", ["1_00", "\u0663\u0660", "\u00b2\u00b2", "1e2", " "])
def test_a_link_number_not_in_ascii_digits_is_ignored_and_said_so(raw: str) -> None:
    state, problems = from_query({"max_nodes": raw})
    assert state.options.max_nodes == Options().max_nodes
    assert any(p.startswith(f"ignored ?max_nodes={raw}: expected a whole number from") and "digits 0-9" in p
               for p in problems), problems


def test_a_link_number_in_ascii_digits_is_read() -> None:
    state, problems = from_query({"max_nodes": "500", "depth": "2"})
    assert (state.options.max_nodes, state.options.module_depth, problems) == (500, 2, [])


@pytest.mark.parametrize("device", ["cuda:\u0663", "cuda:\u00b2", "cuda:1_0"])
def test_a_device_index_in_other_digits_is_refused_not_read(device: str) -> None:
    from graphviz_app.expr.api import resolve_device

    with pytest.raises(ExprError, match=r"device must be 'cpu', 'cuda' or 'cuda:N'"):
        resolve_device(device)


@pytest.mark.parametrize("raw", ["cuda:\u0663", "cuda:\u00b2", "cuda:1_0", "tpu"])
def test_a_link_device_not_written_in_ascii_digits_is_ignored_and_said_so(raw: str) -> None:
    state, problems = from_query({"device": raw})
    assert state.options.device == "cpu"
    assert problems == [f"ignored ?device={raw}: expected cpu, cuda or cuda:N (N written with the digits 0-9)"]


def test_a_link_device_in_ascii_digits_is_kept() -> None:
    assert from_query({"device": "cuda:1"})[0].options.device == "cuda:1"
