"""The SVG download is laid out under a deadline: a slow layout gives a message, not a stuck process."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from graphviz_app.jobs.page import analysis_job
from graphviz_app.jobs.pictures import svg_job
from graphviz_app.web.results import Analysis, Failure
from graphviz_app.web.urlstate import Options

# One weight shared by every layer: dot spends minutes on its ~900 nodes.
SLOW_TO_LAY_OUT = """torch.manual_seed(0)
W = (torch.randn(16, 16) * 0.25).requires_grad_()
h = torch.randn(4, 16)
for i in range(100):
    h = h + torch.tanh(F.layer_norm(h @ W, (16,)))
h.sum()
"""


def dot_children(name: str = "dot") -> list[int]:
    """Our own child processes that are `dot` (or `name`)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().split()
        except OSError:
            continue
        if fields[1] == f"({name})" and int(fields[3]) == os.getpid():
            found.append(int(fields[0]))
    return found


@pytest.mark.slow  # runs into the 3 s layout budget
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="counts child processes through /proc")
def test_a_slow_svg_layout_draws_a_smaller_view_within_its_budget_and_dot_does_not_linger() -> None:
    result = analysis_job(SLOW_TO_LAY_OUT, Options(max_nodes=5000))
    assert isinstance(result, Analysis)  # the page shows it at once: the browser lays out what is open
    budget_s = 3.0
    start = time.monotonic()
    with pytest.warns(UserWarning, match=r"drew only the [\d,]+ nodes nearest the output"):
        found = svg_job(result.graph_json, "TB", budget_s)
    assert isinstance(found, bytes), found
    svg = found.decode()
    assert svg.lstrip().startswith("<?xml")
    # The note drawn at the top of the picture says what was left out, and how to see everything.
    note = r"drew only the [\d,]+ nodes nearest the output, of [\d,]+, to fit the 3 s deadline"
    assert re.search(note, svg), svg[-800:]
    # Within the budget (room for a busy machine); the full view would keep dot busy for minutes.
    assert time.monotonic() - start < budget_s + 30
    assert dot_children() == []


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="counts child processes through /proc")
def test_a_layout_that_cannot_finish_at_all_says_what_to_download_instead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    result = analysis_job("x = torch.ones(3, requires_grad=True)\n(x * 2).sum()", Options())
    assert isinstance(result, Analysis)
    hanging = tmp_path / "bin" / "dot"  # not even the smallest view is ever laid out
    hanging.parent.mkdir()
    hanging.write_text("#!/bin/sh\nexec /bin/sleep 60\n")
    hanging.chmod(0o755)
    monkeypatch.setenv("PATH", str(hanging.parent))
    found = svg_job(result.graph_json, "TB", 1.0)
    assert isinstance(found, Failure) and found.kind == "render", found
    assert "took over" in found.message and "draw fewer nodes" in found.message
    assert "laid out in your browser" in found.message and "graphviz-app render autograd.json" in found.message
    assert dot_children("sleep") == []  # the stopped layout program is gone, not left running
