"""The timeline's note on op temporaries: absent where trace_model looked for them on meta and found none, also
after the graph's JSON is saved and loaded; present on a plain trace, which never looked."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from mem_oracle import StepSpec, memtracker_peak

from graphviz_app import Graph, memory_timeline, save, trace, trace_model
from graphviz_app.analysis.memory.op_bytes import TEMPORARIES_ATTR
from graphviz_app.model.annotations import TEMPORARIES_FOUND_ATTR

NOT_IN_GRAPH = "temporaries each op's backward makes"


def _mlp() -> tuple[torch.nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    return model, torch.randn(3, 8)


def _reloaded(graph: Graph, tmp_path: Path) -> Graph:
    path = tmp_path / "step.json"
    save(graph, str(path))
    return Graph.from_json(path.read_text())


def _notes_say_missing(graph: Graph) -> bool:
    return any(NOT_IN_GRAPH in note for note in memory_timeline(graph).notes)


def test_a_traced_model_whose_ops_make_no_temporaries_has_no_note_that_they_are_missing(tmp_path: Path) -> None:
    model, x = _mlp()
    graph = trace_model(model, x)
    # the premise: no op of this MLP makes a temporary, so nothing but the marker tells "looked, found none"
    assert not any(k == TEMPORARIES_ATTR for n in graph.nodes for k, _ in n.attrs)
    outputs = [n for n in graph.nodes if n.kind.value == "output"]
    assert outputs and all(TEMPORARIES_FOUND_ATTR in dict(n.attrs) for n in outputs)
    assert not _notes_say_missing(graph)
    assert not _notes_say_missing(_reloaded(graph, tmp_path))


def test_a_plain_trace_of_the_same_model_still_says_they_are_missing(tmp_path: Path) -> None:
    model, x = _mlp()
    graph = trace(model(x))
    assert not any(k == TEMPORARIES_FOUND_ATTR for n in graph.nodes for k, _ in n.attrs)
    assert _notes_say_missing(graph)
    assert _notes_say_missing(_reloaded(graph, tmp_path))


class _Summed(torch.nn.Module):
    """The MLP with its loss inside (a sum: its backward makes no temporary either)."""

    def __init__(self) -> None:
        super().__init__()
        self.mlp = _mlp()[0]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mlp(x).sum()


@pytest.mark.parametrize("batch", [1, 4])
def test_the_traced_models_replayed_peak_is_pytorchs(batch: int) -> None:
    """With the note gone, the replay of trace_model's graph is what PyTorch's MemTracker counts on the real step."""
    x = torch.randn(batch, 8)
    real = memtracker_peak(StepSpec(_Summed, lambda b: ((x,), {}), lambda out: out), batch).peak_bytes
    torch.manual_seed(0)
    timeline = memory_timeline(trace_model(_Summed(), x))
    assert not any(NOT_IN_GRAPH in note for note in timeline.notes)
    assert timeline.peak_bytes == real
