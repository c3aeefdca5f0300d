"""Judging a program's cost from its text before it runs: which programs may take the last free worker."""

from __future__ import annotations

import pytest

from graphviz_app.web.gallery import EXAMPLES
from graphviz_app.web.program_cost import judge

RUNAWAY = ("# attempt 7: a new comment every time\ntorch.manual_seed(7)\na = torch.randn(400, 20000)\n"
           "for i in range(1000):\n    b = torch.cdist(a, a, p=1).sum()\nb")


@pytest.mark.parametrize(
    ("program", "verdict"),
    [
        # light: small literal sizes, short loops
        ("x = torch.arange(3., requires_grad=True)\n((x+2)**2+3).mean()", "light"),
        ("x = torch.randn(3)\nfor i in range(10):\n    x = x * 2\nx.sum()", "light"),
        ("torch.full((3, 3), 7.).sum()", "light"),
        ("n = 100\ntorch.randn(n, n).sum()", "light"),  # a size from a constant
        ("torch.linspace(0, 1, 50).sum()", "light"),
        ("x = torch.ones(3)\nx.expand(-1, 3).sum()", "light"),
        ("torch.randn(1000, 1000).sum()", "light"),  # exactly a million elements
        # heavy: big literal sizes, or many small ones in a loop
        (RUNAWAY, "heavy"),  # the page's runaway: 8 million elements, then a loop of cdists
        ("n = 20000\ntorch.randn(400, n).sum()", "heavy"),
        ("torch.randn(int(3e10)).sum()", "heavy"),  # a memory bomb is large too
        ("torch.ones(10**5, 10**5).sum()", "heavy"),
        ("torch.randint(0, 9, (300, 4000)).sum()", "heavy"),  # the shape as one tuple
        ("torch.arange(0, 2e6, 1).sum()", "heavy"),
        ("torch.ones(3).repeat(2000, 1000).sum()", "heavy"),  # grown from a small tensor
        ("x = torch.randn(1000)\nfor i in range(1000):\n    x = x * 2\nx.sum()", "light"),  # 1,000 ops
        ("x = torch.randn(1000)\nfor i in range(1000):\n    x = -(x * 2 + 1)\nx.sum()", "heavy"),  # 3,000
        ("x = torch.ones(1)\nfor i in range(1000):\n    x = x.sin().cos().exp()\nx", "heavy"),  # 3,000 ops
        ("n = 500\nfor i in range(10):\n    for j in range(10):\n        a = torch.randn(n, 50)\na",
         "heavy"),  # loops multiply: 100 x 25,000
        # unknown: the text does not say
        ("x = torch.arange(3.)\ntorch.randn(x.shape[0] * 10**7)", "unknown"),  # a size computed at run time
        ("x = torch.arange(3.)\ny = torch.randn(x.shape[0])\ntorch.randn(5000, 5000).sum()",
         "heavy"),  # one size unknown, another large: large
        ("torch.arange(0, 1e999).sum()", "unknown"),  # an infinite size: the worker says what is wrong
        ("import os", "unknown"),  # refused by the language
        ('{"nodes": [], "edges": []}', "unknown"),  # not a program (a graph's JSON, for a picture)
        ("x = torch.randn(3", "unknown"),  # a syntax error
    ],
)
def test_a_program_is_judged_by_its_literal_sizes_and_loops(program: str, verdict: str) -> None:
    assert judge(program) == verdict


def test_a_comment_or_seed_changes_nothing_a_runaway_stays_heavy() -> None:
    texts = {RUNAWAY.replace("7", str(k)) for k in range(20)}
    assert len(texts) == 20 and {judge(t) for t in texts} == {"heavy"}


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: e.key)
def test_every_gallery_example_is_light(example) -> None:  # noqa: ANN001 - a parametrized Example
    assert judge(example.program) == "light"
