"""The SVG download is laid out under a deadline: a slow layout gives a message, not a stuck process."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from graphviz_app.web.results import Analysis, Failure
from graphviz_app.web.urlstate import Options
from graphviz_app.web.worker.jobs import analysis_job
from graphviz_app.web.worker.pictures import svg_job

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


@pytest.mark.slow  # runs into the 3 s layout budget
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="counts child processes through /proc")
def test_a_slow_svg_layout_is_stopped_at_its_budget_and_dot_does_not_linger() -> None:
    result = analysis_job(SLOW_TO_LAY_OUT, Options(max_nodes=5000))
    assert isinstance(result, Analysis)  # the page shows it at once: the browser lays out what is open
    budget_s = 3.0
    start = time.monotonic()
    found = svg_job(result.graph_json, "TB", budget_s)
    # Either answer is one a person can act on: the nodes nearest the output, drawn with a note saying what
    # was left out (when the smaller view fits in what is left of the budget), or a message.
    if isinstance(found, Failure):
        assert found.kind == "render"
        assert "took over 3 s" in found.message and "draw fewer nodes" in found.message
        assert "laid out in your browser" in found.message and "graphviz-app render autograd.json" in found.message
    else:
        svg = found.decode()
        assert svg.startswith("<?xml") and "drew only the" in svg and "allow more time" in svg
    # Stopped at the budget (room for a busy machine); not stopped, dot would run for minutes.
    assert time.monotonic() - start < budget_s + 30
    assert dot_children() == []
