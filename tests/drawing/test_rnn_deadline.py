"""The Embedding -> 2-layer LSTM -> GRU -> Linear tagger drawn with depth=2, roll=True arrives within its deadline.

On CPU the GRU unrolls into hundreds of ops whose weights feed every step, so
its full picture took `dot` over 10 minutes; every module sits at depth 1, so
`depth=2` folds nothing. The library says both, and draws a folded view in time.
"""

from __future__ import annotations

import time
import warnings
from pathlib import Path

import pytest
import torch
from torch import nn

from graphviz_app import save, trace_model
from graphviz_app.drawing.cost import measure
from graphviz_app.model import Graph, NodeKind


class Tagger(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embedding = nn.Embedding(100, 16)
        self.lstm = nn.LSTM(16, 32, num_layers=2, batch_first=True)
        self.gru = nn.GRU(32, 32, batch_first=True)
        self.linear = nn.Linear(32, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, _ = self.lstm(self.embedding(x))
        h, _ = self.gru(h)
        return self.linear(h)


@pytest.fixture(scope="module")
def tagger_graph() -> Graph:
    torch.manual_seed(0)
    return trace_model(Tagger(), torch.randint(0, 100, (2, 32)))


def test_the_unrolled_gru_is_what_makes_the_layout_costly(tagger_graph: Graph) -> None:
    assert 750 <= len(tagger_graph.nodes) <= 850
    cost = measure(tagger_graph)
    assert cost.virtual > 10 * cost.nodes  # weights read by every step: long edges, not many nodes


def test_save_with_depth_2_and_roll_arrives_within_its_deadline_with_notes(tagger_graph: Graph, tmp_path: Path) -> None:
    deadline = 20.0
    lines: list[str] = []
    start = time.monotonic()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        path = save(tagger_graph, tmp_path / "rnn.svg", depth=2, roll=True, timeout=deadline, progress=lines.append)
    took = time.monotonic() - start
    # The deadline is the feature; a margin for a busy machine, far below the full view's minutes.
    assert took < deadline + 20.0
    said = [str(w.message) for w in caught]
    assert said[0] == ("depth=2 folds nothing: the deepest module with ops is at depth 1 ('lstm'); "
                       "depth=0 draws the modules at depth 1 as boxes")
    assert said[1].startswith("folded 1 module(s) into boxes to fit the 20 s deadline: gru (GRU); the full view ")
    assert all(w.filename == __file__ for w in caught)  # at the line that called save()
    svg = path.read_text()
    assert "gru: GRU" in svg and "folded 1 module(s)" in svg
    assert said[0] in lines and said[1] in lines and lines[-1].startswith("laid out in ")


def test_the_folded_view_keeps_every_other_module_open(tagger_graph: Graph) -> None:
    from graphviz_app.drawing.renderer import export_drawing

    drawn = export_drawing(tagger_graph, "svg", depth=2, roll=True, timeout=20.0)
    boxes = [n.module for n in drawn.graph.nodes if n.kind is NodeKind.MODULE]
    assert boxes == ["gru"] and drawn.folded == ("gru",)
    assert {n.module for n in drawn.graph.nodes if n.kind is NodeKind.OP} >= {"embedding", "lstm", "linear"}
