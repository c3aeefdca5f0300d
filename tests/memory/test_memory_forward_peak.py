"""A step whose peak is in the forward: the timeline takes the forward's own peak and says so."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch
from mem_oracle import memtracker_peak
from mem_zoo import GRUTagger, by_name

from graphviz_app import save, trace_model
from graphviz_app.analysis.memory import MemoryStep, MemoryTimeline, ModuleBytes, memory_timeline
from graphviz_app.cli.saved import load_saved_graph
from graphviz_app.errors import SchemaError
from graphviz_app.memory import forecast, measure
from graphviz_app.model import FORWARD_PEAK_ATTR, Edge, Graph, Node, NodeKind


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


def test_a_forward_peak_does_not_call_the_backward_peaks_holders_the_peaks() -> None:
    # The modules listed are what the backward replay holds at its own peak (step 1, 600 B), not what the
    # forward held at the step's peak (1,000 B): the text says which, and names no backward step as the peak's.
    timeline = MemoryTimeline(
        (MemoryStep(None, 500, 500, 500), MemoryStep("n3", 500, 600, 100)), peak_bytes=1000, peak_step=1,
        at_peak=(ModuleBytes("fc", gradients=600),), forward_peak_bytes=1000)
    lines = str(timeline).splitlines()
    assert lines[0] == "peak 1000 B during the forward; 500 B alive at the end of the forward"
    assert lines[1] == "held at the backward's own peak, 600 B while n3 runs (step 1 of 1):"
    assert lines[2] == "  fc: gradients in flight 600 B"


def test_a_graph_alone_says_its_forward_is_not_replayed() -> None:
    alone = memory_timeline(trace_model(GRUTagger(), torch.randint(0, 200, (2, 8))))
    assert alone.forward_peak_bytes is None and not alone.peak_in_forward
    assert any("forward's own peak is not replayed" in n for n in alone.notes)
    assert forecast(GRUTagger(), torch.randint(0, 200, (2, 8))).timeline.forward_peak_bytes is not None


@pytest.mark.parametrize("how", ["measure", "forecast"])
def test_a_saved_graph_keeps_the_forward_peak_its_run_counted(how: str, tmp_path: Path) -> None:
    torch.manual_seed(0)
    ids = torch.randint(0, 200, (8, 48), generator=torch.Generator().manual_seed(8))
    if how == "measure":
        m = measure(GRUTagger(), ids)
        graph, forward, peak = m.graph, m.measured.forward_peak_bytes, m.predicted.peak_bytes
    else:
        p = forecast(GRUTagger(), ids, policy="cpu")
        graph, forward, peak = p.graph, p.timeline.forward_peak_bytes, p.timeline.peak_bytes
    save(graph, tmp_path / "g.json")
    loaded = load_saved_graph(tmp_path / "g.json")
    timeline = memory_timeline(loaded)
    assert timeline.forward_peak_bytes == forward and timeline.peak_in_forward and timeline.peak_bytes == peak
    assert not any("forward's own peak is not replayed" in n for n in timeline.notes)


def test_an_older_file_without_the_forward_peak_still_loads_and_says_so(tmp_path: Path) -> None:
    save(trace_model(GRUTagger(), torch.randint(0, 200, (2, 8))), tmp_path / "old.json")
    timeline = memory_timeline(load_saved_graph(tmp_path / "old.json"))
    assert timeline.forward_peak_bytes is None
    assert any("forward's own peak is not replayed" in n for n in timeline.notes)


@pytest.mark.parametrize(("node", "value", "error"), [
    (0, "12 KiB", r"nodes\[0\] \('n0'\)\.attrs\[0\] \('forward peak bytes'\) holds the wrong kind of value: "
                  r"expected a whole number of bytes as text, found '12 KiB'"),
    (1, "96", r"nodes\[1\] \('n1'\)\.attrs\[0\]: 'forward peak bytes' belongs on an output node, found on a "
              r"node of kind op"),
])
def test_a_forward_peak_that_is_not_a_whole_number_on_an_output_is_refused(node: int, value: str, error: str) -> None:
    nodes = [Node("n0", NodeKind.OUTPUT, "output"), Node("n1", NodeKind.OP, "SumBackward0", recency=0)]
    nodes[node] = dataclasses.replace(nodes[node], attrs=((FORWARD_PEAK_ATTR, value),))
    with pytest.raises(SchemaError, match=error):
        Graph.from_json(Graph(tuple(nodes), (Edge("n1", "n0"),)).to_json())
