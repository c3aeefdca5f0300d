"""A step whose peak is in the forward: the timeline takes the forward's own peak and says so."""

from __future__ import annotations

import torch
from mem_oracle import memtracker_peak
from mem_zoo import GRUTagger, by_name

from graphviz_app.analysis.memory import memory_timeline
from graphviz_app.memory import forecast, measure


def test_a_gru_taggers_peak_is_its_forwards() -> None:
    spec = by_name("gru-tagger").spec
    (ids,), _ = spec.inputs(8)
    torch.manual_seed(0)
    m = measure(GRUTagger(), ids)
    oracle = memtracker_peak(spec, 8).peak_bytes
    assert m.measured.peak_bytes == oracle
    assert m.predicted.peak_in_forward and m.predicted.peak_node is None
    assert m.predicted.peak_bytes == m.measured.forward_peak_bytes == oracle
    assert "during the forward" in str(m.predicted)
    assert max(s.peak for s in m.predicted.steps) < oracle  # the backward replay alone would miss it


def test_a_graph_alone_says_its_forward_is_not_replayed() -> None:
    m = measure(GRUTagger(), torch.randint(0, 200, (2, 8)))
    alone = memory_timeline(m.graph)
    assert alone.forward_peak_bytes is None and not alone.peak_in_forward
    assert any("forward's own peak is not replayed" in n for n in alone.notes)
    assert forecast(GRUTagger(), torch.randint(0, 200, (2, 8))).timeline.forward_peak_bytes is not None
