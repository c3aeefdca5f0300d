"""What the server runs on user text raises only the language's own errors, whatever the text.

The page checks the program on load and on every keystroke in the server
process (`validate` through `service.syntax_problem`) and reads programs out
of links (`urlstate.from_query`): an exception there is a bug page for
everyone who opens the link. Every entry point gets the red-team corpus
(`hostile.py`), long literals of every base and odd text.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qs

import pytest
from hostile import corpus

from graphviz_app.cli.commands import EXIT_BAD_INPUT, main
from graphviz_app.expr import ExprError, validate
from graphviz_app.expr.validator import parse
from graphviz_app.web import service
from graphviz_app.web.results import Failure
from graphviz_app.web.urlstate import MAX_URL_PROGRAM_CHARS, SEED_PROGRAM, from_query, share_query

_PRELUDE = "x = torch.ones(3)\n"

# Literals Python itself refuses or cannot print: decimals past 4,300 digits
# (refused while parsing), hex/octal/binary ones whose decimal form is longer.
LONG_LITERALS: dict[str, str] = {
    "hex": "x = 0x" + "f" * 3600 + "\nx",
    "hex_negative": "x = -0x" + "F" * 3600 + "\nx",
    "octal": "x = 0o" + "7" * 5000 + "\nx",
    "binary": "x = 0b" + "1" * 9000 + "\nx",
    "decimal": "x = " + "9" * 4301 + "\nx",
    "decimal_in_call": "y = torch.ones(" + "1" * 5000 + ")\ny",
    "decimal_underscores": "x = 1" + "_0" * 4400 + "\nx",
    "decimal_second_line": "y = 1\nz = (" + "1" * 6000 + ")\nz",
    "hex_in_range": "for i in range(0x" + "f" * 2000 + "):\n    y = 1\ntorch.ones(1)",
    "hex_subscript": "x = torch.ones(3)\nx[0x" + "f" * 3000 + "]",
}

# Odd text from the red team beside the corpus: encodings, separators, sizes.
ODD_TEXT: list[str] = [
    "1" * 5000 + ".0",  # a long float is fine
    "1e99999",
    "'" + "a" * 9000 + "'",
    "\ufeffx = torch.ones(1)\nx",
    "x = torch.ones(1)\r\nx",
    "x = torch.ones(1)\x0cx",
    "x = torch.ones(1)\n\x00",
    "x = torch.ones(1)\n'\ud800'",
    "x = torch.ones(1)\n# \udfff\nx",
    "\t" * 3000 + "x",
    "(" * 200,
    ")" * 200,
    "x = torch.ones(1)\n" + "x[" * 100 + "0" + "]" * 100,
    "0" * 4400 + "1",
    "x = 1_",
    "x = 0x",
    "x = 0b2",
    "1" * 4301 + "j",
    "x = torch.ones(1)\n" + "x." * 2000 + "T",
]

CASES = [_PRELUDE + source.replace("{canary}", "/nonexistent/canary") for source, _ in corpus()]
CASES += list(LONG_LITERALS.values()) + ODD_TEXT


def _language_error(e: ExprError) -> None:
    assert e.kind != "internal", e.message
    assert e.message.strip() and "\n" not in str(e)
    assert "set_int_max_str_digits" not in e.message  # Python's advice, which no page visitor can follow


@pytest.mark.parametrize("entry", ["validate", "parse"])
def test_the_validator_raises_only_its_own_errors_on_the_whole_corpus(entry: str) -> None:
    check = validate if entry == "validate" else parse
    for source in CASES:
        try:
            check(source)
        except ExprError as e:
            _language_error(e)


def test_the_page_keystroke_check_answers_every_case_with_a_message_or_nothing() -> None:
    for source in CASES:
        problem = service.syntax_problem(source)
        assert problem is None or (isinstance(problem, Failure) and problem.kind != "internal"), source[:80]


def test_links_carrying_any_case_are_read_without_raising() -> None:
    for source in CASES:
        state, problems = from_query({"program": source, "max_nodes": source[:5000], "depth": source[:9000],
                                      "dtype": source[:50], "grad": source, "wrt": source[:30], "expand": source})
        assert state.program == source
        assert all(isinstance(p, str) for p in problems)
        again, _ = from_query(parse_qs(share_query(state)))  # the page's link to it
        assert again.program == (source if len(source) <= MAX_URL_PROGRAM_CHARS else SEED_PROGRAM) or (
            again.program == re.sub("[\ud800-\udfff]", "\ufffd", source))


@pytest.mark.parametrize("name", sorted(LONG_LITERALS))
def test_long_literals_of_every_base_are_refused_with_a_message_a_person_can_follow(name: str) -> None:
    with pytest.raises(ExprError) as info:
        validate(LONG_LITERALS[name])
    err = info.value
    assert err.kind == "limit"
    assert re.search(r"integer literal .*(bits|digits); integers must fit in 64 bits .*write 1e30|"
                     r"^the loop runs more than 2\*\*7999 times; the limit is 1,000", err.message), err.message
    assert err.line is not None and err.col is not None  # the page points at it
    assert len(err.message) < 300  # the literal is abridged, not repeated


@pytest.mark.parametrize(
    ("literal", "needs"),
    [("0x" + "f" * 3600, "14,400 bits"), ("0o" + "7" * 5000, "15,000 bits"), ("0b" + "1" * 9000, "9,000 bits")],
    ids=["hex", "octal", "binary"],
)
def test_a_long_literal_of_any_base_in_the_cli_is_bad_input_not_a_broken_environment(
    literal: str, needs: str, capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["render", "x", "--var", "x=" + literal, "-o", "never-written.svg"])
    err = capsys.readouterr().err
    assert code == EXIT_BAD_INPUT
    said = rf"--var 1 .*integer literal {literal[:2]}.* needs {needs}; integers must fit in 64 bits"
    assert re.search(said, err), err
    assert err.count("\n") == 1


def test_a_long_literal_in_a_cli_program_is_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["render", "x = 0b" + "1" * 9000 + "\nx", "-o", "never-written.svg"])
    err = capsys.readouterr().err
    assert code == EXIT_BAD_INPUT
    assert "integers must fit in 64 bits" in err and err.count("\n") == 1
