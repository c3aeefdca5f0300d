"""Graphviz runs under a deadline: a graph it lays out slowly gives a message, not a stuck process."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from graphviz_app.errors import RenderError
from graphviz_app.web.jobs import analysis_job
from graphviz_app.web.layout import LayoutTimeout, lay_out
from graphviz_app.web.results import Failure
from graphviz_app.web.urlstate import Options

# One weight shared by every layer: dot spends minutes on its ~900 nodes.
SLOW_TO_LAY_OUT = """torch.manual_seed(0)
W = (torch.randn(16, 16) * 0.25).requires_grad_()
h = torch.randn(4, 16)
for i in range(100):
    h = h + torch.tanh(F.layer_norm(h @ W, (16,)))
h.sum()
"""


def dot_children() -> list[int]:
    """Our own child processes that are `dot`."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().split()
        except OSError:
            continue
        if fields[1] == "(dot)" and int(fields[3]) == os.getpid():
            found.append(int(fields[0]))
    return found


def test_one_layout_writes_every_format_asked_for() -> None:
    out = lay_out("digraph { a -> b }", ["svg", "png"], timeout=30)
    assert out["svg"].lstrip().startswith(b"<?xml") and b"<svg" in out["svg"]
    assert out["png"].startswith(b"\x89PNG")


@pytest.mark.parametrize(
    ("source", "formats", "words"),
    [("digraph { a -> }", ["svg"], "Graphviz failed to lay out the graph: Error"),
     ("digraph { a }", ["gif"], "cannot lay out as gif: choose from svg, png, pdf")],
)
def test_a_layout_that_cannot_be_made_says_why(source: str, formats: list[str], words: str) -> None:
    with pytest.raises(RenderError, match=words.replace("(", r"\(")):
        lay_out(source, formats, timeout=30)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="counts child processes through /proc")
def test_a_slow_layout_is_stopped_at_its_budget_and_dot_does_not_linger() -> None:
    start = time.monotonic()
    result = analysis_job(SLOW_TO_LAY_OUT, Options(max_nodes=5000), 3.0)
    assert isinstance(result, Failure)
    assert result.kind == "layout"
    assert "needed more than" in result.message and "lower the node limit" in result.message
    assert time.monotonic() - start < 15
    assert dot_children() == []
