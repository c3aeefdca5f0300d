"""Numbers read from text: ASCII digits only (int() also reads `1_0` and other scripts' digits), in range."""

from __future__ import annotations

import pytest

from graphviz_app.model.numbers import NumberError, is_decimal, real_number, whole_number

WHOLE = [("0", 0), ("42", 42), (" 7 ", 7), ("+5", 5), ("2147483647", 2**31 - 1)]
NOT_WHOLE = [
    ("1_0", r"digits 0-9, found '1_0'$"),
    ("\u0663", r"digits 0-9, found '\u0663'$"),  # Arabic-Indic three: int() reads 3
    ("\u00b2", r"digits 0-9, found '\u00b2'$"),  # superscript two: isdigit() is True, int() raises
    ("\uff11", r"digits 0-9"),  # fullwidth one
    ("1e3", r"found '1e3' \(1e3 is 1,000\)$"),
    ("2.5", r"digits 0-9, found '2.5'$"),
    ("", r"digits 0-9, found ''$"),
    ("-3", r"from 0 to 2,147,483,647, found -3$"),
    ("2147483648", r"found 2,147,483,648$"),
    ("9" * 5000, r"found a number of 5,000 digits$"),  # int() itself refuses past 4,300 digits
]


@pytest.mark.parametrize(("text", "value"), WHOLE)
def test_whole_numbers_in_ascii_digits_are_read(text: str, value: int) -> None:
    assert whole_number(text) == value


@pytest.mark.parametrize(("text", "message"), NOT_WHOLE, ids=[ascii(t[:8]) for t, _ in NOT_WHOLE])
def test_anything_else_is_refused_saying_the_range(text: str, message: str) -> None:
    with pytest.raises(NumberError, match=message):
        whole_number(text)


@pytest.mark.parametrize(("text", "expected"), [("12", True), ("1_0", False), ("\u00b2", False), ("\u0663", False),
                                                ("", False), ("-1", False)])
def test_is_decimal_is_ascii_digits_only(text: str, expected: bool) -> None:
    assert is_decimal(text) is expected
    if expected:
        assert int(text) >= 0


@pytest.mark.parametrize(("text", "kwargs", "message"), [
    ("nan", {}, r"digits 0-9 \(e.g. 30, 2.5 or 1e-6\), found 'nan'"),
    ("inf", {}, r"found 'inf'"),
    ("1_0.5", {}, r"found '1_0.5'"),
    ("\u0661.5", {}, r"found '\u0661.5'"),
    ("1e400", {}, r"expected a number at least 0, found '1e400'"),  # overflows to inf
    ("0", {"low_open": True}, r"expected a number above 0, found '0'"),
    ("11", {"high": 10.0}, r"at least 0 and at most 10, found '11'"),
])
def test_real_numbers_refuse_what_float_would_read(text: str, kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(NumberError, match=message):
        real_number(text, **kwargs)  # type: ignore[arg-type]


def test_real_numbers_in_ascii_are_read() -> None:
    assert [real_number(t) for t in ("1", "2.5", ".5", "1e-6", "3E2", " 4. ")] == [1.0, 2.5, 0.5, 1e-6, 300.0, 4.0]
