"""The page's cost judge: anything it cannot judge is "unknown", never an error in the server, and a loop of
calls each reading a known amount is weighed by what they read, not only by how many calls there are."""

from __future__ import annotations

import pytest

from graphviz_app.web.program_cost import MAX_LIGHT_READS, judge

ODD_SIZES = [
    "n = (-1.0) ** 0.5\ny = torch.randn(int(n))\ny",
    "n = (-1.0) ** 0.5\nfor i in range(n):\n    x = torch.ones(2)\nx",
    "x = torch.randn(3)\nfor i in range(int((-1.0) ** 0.5)):\n    y = x\ny",
    "x = torch.randn(int(0.0 ** -1))\nx",
    "x = torch.randn(10 ** 10 ** 10)\nx",
    "x = torch.randn(int(1e999))\nx",
    "x = torch.zeros((2, (-2) ** 0.5))\nx",
    "x = torch.arange(0, 10, (-1) ** 0.5)\nx",
    "x = torch.linspace(0, 1, (-1) ** 0.5)\nx",
]


@pytest.mark.parametrize("source", ODD_SIZES)
def test_a_size_that_is_no_number_is_judged_never_an_error(source: str) -> None:
    assert judge(source) in ("light", "unknown", "heavy")


def test_a_tensor_sized_by_a_complex_number_is_unknown() -> None:
    assert judge(ODD_SIZES[0]) == "unknown"


@pytest.mark.parametrize(("source", "verdict"), [
    ("a = torch.randn(999, 1000)\nfor i in range(1000):\n    b = torch.median(a)\nb", "heavy"),
    ("a = torch.randn(999, 1000)\nb = torch.median(a)\nb", "light"),
    ("a = torch.randn(999, 1000)\nfor i in range(100):\n    a = a * 1.0001\na.sum()", "heavy"),
    ("a = torch.randn(100, 100)\nfor i in range(100):\n    a = a.tanh()\na.sum()", "light"),
    ("x = torch.arange(3., requires_grad=True)\n((x+2)**2+3).mean()", "light"),
], ids=["median 1,000 times", "median once", "a million elements 100 times", "small loop", "seed"])
def test_reads_in_loops_are_counted(source: str, verdict: str) -> None:
    assert judge(source) == verdict


def test_the_read_limit_is_the_line() -> None:
    times = MAX_LIGHT_READS // 1_000_000  # a million-element tensor summed this often reads exactly the limit
    at = f"a = torch.randn(1000, 1000)\nfor i in range({times}):\n    b = a.sum()\nb"
    over = f"a = torch.randn(1000, 1000)\nfor i in range({times + 1}):\n    b = a.sum()\nb"
    assert judge(at) == "light" and judge(over) == "heavy"
