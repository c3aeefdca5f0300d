"""A link holds the program and the options: what a person writes by hand is read back."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlencode

import pytest
from manual import manual_text

from graphviz_app.web.urlstate import (
    MAX_URL_PROGRAM_CHARS,
    SEED_PROGRAM,
    CheckInput,
    Options,
    PageState,
    from_query,
    share_query,
    to_query,
)


def test_an_empty_query_gives_the_seed_example_and_defaults() -> None:
    state, problems = from_query({})
    assert state == PageState()
    assert state.program == SEED_PROGRAM
    assert "torch.arange(3., requires_grad=True)" in state.program
    assert problems == []


def test_the_readmes_hand_written_link_is_read_back() -> None:
    readme = manual_text()
    link = re.search(r"`http://localhost:8501/\?([^`]+)`", readme)
    assert link is not None, "the README's web section shows a hand-written link"
    state, problems = from_query(dict(parse_qs(link.group(1))))
    assert state.program == "y = torch.ones(2, requires_grad=True)\n(y*3).sum()"
    assert state.options == Options(rankdir="LR")
    assert problems == []


def test_case_and_spelling_of_options_are_forgiven() -> None:
    state, problems = from_query({"rankdir": "lr", "saved": "no", "attrs": "true", "max_nodes": "50"})
    assert state.options == Options(rankdir="LR", show_saved=False, show_attrs=True, max_nodes=50)
    assert problems == []


@pytest.mark.parametrize(
    ("key", "raw", "expected_words"),
    [
        ("dtype", "float8", "one of float32, float64, float16, bfloat16"),
        ("rankdir", "up", "one of TB, LR, BT, RL"),
        ("saved", "maybe", "1 or 0"),
        ("max_nodes", "lots", "a whole number from 10 to 20000 written with the digits 0-9"),
        ("max_nodes", "999999", "a whole number from 10 to 20000 written with the digits 0-9"),
    ],
)
def test_a_bad_parameter_is_ignored_with_a_reason(key: str, raw: str, expected_words: str) -> None:
    state, problems = from_query({key: raw})
    assert state.options == Options()  # the default stands
    assert problems == [f"ignored ?{key}={raw}: expected {expected_words}"]


@pytest.mark.parametrize(
    "state",
    [
        PageState(),
        PageState(program="a = torch.zeros(2, 2, requires_grad=True)\n(a @ a).sum()\n"),
        PageState(options=Options(device="cuda:1", dtype="float64", show_saved=False,
                                  show_attrs=False, rankdir="RL", max_nodes=10)),
        PageState(check=CheckInput(wrt="x", expected="2*(x+2)/3")),
        PageState(program="s = 'naïve & <odd> ? # %'\nx = 1"),
    ],
)
def test_the_query_round_trips(state: PageState) -> None:
    text = share_query(state)
    back, problems = from_query({k: v for k, v in parse_qs(text, keep_blank_values=True).items()})
    assert back == state
    assert problems == []


def test_the_program_is_url_encoded_under_program() -> None:
    text = share_query(PageState(program="x = torch.arange(3.)\n(x+2).sum()"))
    assert text.startswith("program=x+%3D+torch.arange%283.%29%0A%28x%2B2%29.sum%28%29&")


def test_a_program_too_long_for_a_link_is_left_out_but_options_stay() -> None:
    long_program = "x = torch.ones(2)\n" + "y = x * 2\n" * (MAX_URL_PROGRAM_CHARS // 10) + "y.sum()"
    query = to_query(PageState(program=long_program, options=Options(dtype="float64")))
    assert "program" not in query
    assert query["dtype"] == "float64"
    assert len(urlencode(query)) < 1000
    assert query["program_chars"] == str(len(long_program))
    state, problems = from_query(query)  # whoever opens that link is told why the seed shows
    assert state.program == SEED_PROGRAM and state.options.dtype == "float64"
    assert problems == [
        f"the program ({len(long_program)} characters) was too long for a link (at most 4,000), "
        "so the link left it out and the seed example is shown: ask for the program as a file"
    ]


def test_no_check_means_no_check_parameters() -> None:
    assert {"wrt", "grad"}.isdisjoint(to_query(PageState()))
