"""Op backward temporaries of a graph traced by `trace_model` (no run behind it): each distinct op's backward run
once on meta, against what `measure()` records as the real step runs and PyTorch's MemTracker."""

from __future__ import annotations

from collections import Counter

import mem_zoo
import pytest
import torch
from custom_functions import Doubled
from mem_models import Cube
from mem_oracle import StepSpec, memtracker_peak

from graphviz_app import memory_timeline, trace, trace_model
from graphviz_app.analysis.memory.op_bytes import TEMPORARIES_ATTR, read_op_bytes
from graphviz_app.memory import measure
from graphviz_app.model import Graph
from graphviz_app.tracing.memory.step import Step, run_step

NOT_IN_GRAPH = "temporaries each op's backward makes"


class Scaled(torch.nn.Module):
    """(x * w).sum() with w (d,) and x (rows, d) requiring grad: MulBackward0 returns a (rows, d) gradient for w,
    which the engine sums to (d,) before AccumulateGrad (`validate_outputs`): the (rows, d) one is a temporary."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x * self.w).sum()


def _x(rows: int, d: int, grad: bool = False) -> torch.Tensor:
    return torch.randn(rows, d, generator=torch.Generator().manual_seed(0)).requires_grad_(grad)


def _temporaries(graph: Graph) -> Counter[tuple[str, int]]:
    names = {n.id: n.name for n in graph.nodes}
    return Counter((names[k], v) for k, v in read_op_bytes(graph.nodes).temporaries.items())


@pytest.mark.parametrize("batch", [1, 8])
def test_a_traced_models_op_temporaries_are_replayed_as_measured(batch: int) -> None:
    # rows = 16 per batch item, d = 32: Cube.peak_by_hand's count (8 + 4 S), now from trace_model's graph alone,
    # which before had 8 + 2 S and a note.
    d, rows = 32, 16 * batch
    hand, s = Cube.peak_by_hand(rows, d)
    x = _x(rows, d)
    graph = trace_model(Cube(d), x)
    timeline = memory_timeline(graph)
    assert memtracker_peak(StepSpec(lambda: Cube(d), lambda b: ((x,), {}), lambda out: out), batch).peak_bytes == hand
    assert measure(Cube(d), x).measured.peak_bytes == hand
    assert timeline.peak_bytes == hand
    pow_node = next(n for n in graph.nodes if n.name == "PowBackward0")
    assert dict(pow_node.attrs)[TEMPORARIES_ATTR] == str(2 * s)
    assert timeline.peak_node == pow_node.id
    assert not any(NOT_IN_GRAPH in n for n in timeline.notes)


def test_a_plain_trace_still_says_the_temporaries_are_not_in_it() -> None:
    x = _x(16, 32, grad=True)
    timeline = memory_timeline(trace(Cube(32)(x)))
    assert not any(TEMPORARIES_ATTR == k for n in trace(Cube(32)(x)).nodes for k, _ in n.attrs)
    assert any(NOT_IN_GRAPH in n for n in timeline.notes)


@pytest.mark.parametrize("rows", [1, 16])
def test_the_engines_sum_over_broadcast_dimensions_is_a_temporary_of_the_op(rows: int) -> None:
    # MulBackward0 returns grad * x ((rows, d), 4 rows d bytes) for w; the engine sums it to (d,): the
    # unsummed gradient is made and freed inside the op. At rows = 1 the shapes agree except the leading 1.
    d = 32
    x = _x(rows, d, grad=True)
    graph = trace_model(Scaled(d), x)
    m = measure(Scaled(d), x)
    assert _temporaries(graph) == _temporaries(m.graph) == Counter({("MulBackward0", 4 * rows * d): 1})


def test_an_op_whose_formula_differs_under_grad_mode_is_run_as_the_engine_runs_it() -> None:
    # SiluBackward0's formula takes a composite path (with temporaries) only under grad mode; the engine runs
    # backward without it, so neither measure() nor the meta run finds any.
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.SiLU(), torch.nn.Linear(64, 1))
    x = _x(16, 32)
    graph = trace_model(model, x)
    assert _temporaries(graph) == _temporaries(measure(model, x).graph) == Counter()


def test_a_custom_functions_backward_is_left_unmeasured_with_a_note() -> None:
    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(8, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return Doubled.apply(self.lin(x)).pow(3).sum()

    graph = trace_model(Model(), _x(4, 8))
    assert any(note.startswith("1 op(s) were not run on meta") for note in graph.notes)
    assert ("PowBackward0", 2 * 4 * 4 * 8) in _temporaries(graph)


def test_a_copy_back_to_the_forwards_device_runs_on_meta() -> None:
    # ToCopyBackward0 copies the gradient back to the forward's dtype and device (cpu): on meta, the same bytes.
    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(8, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.lin(x).to(torch.float64).pow(3).sum()

    model, x = Model(), _x(4, 8)
    graph = trace_model(model, x)
    assert "ToCopyBackward0" in {n.name for n in graph.nodes}
    assert not any("not run on meta" in note for note in graph.notes)
    assert _temporaries(graph) == _temporaries(measure(model, x).graph) == Counter({("PowBackward0", 2 * 8 * 4 * 8): 1})


@pytest.mark.slow
@pytest.mark.parametrize("name", [
    # Not the autocast zoo rows: trace_model's forward runs on its big-stack thread, where a caller's
    # torch.autocast (thread-local) is not on, so its graph is float32 and measure()'s is bfloat16.
    "gpt2", "bert-mlm", "llama", "t5", "qwen2-tied", "vit", "lstm-lm", "llama-bf16",
])
@pytest.mark.parametrize("batch", [1, 4])
def test_zoo_traced_op_temporaries_equal_the_measured_ones(name: str, batch: int) -> None:
    zoo = mem_zoo.by_name(name)
    model = zoo.spec.prepare(zoo.spec.build())
    args, kwargs = zoo.spec.inputs(batch)
    graph = trace_model(model, *args, **kwargs)
    measured = measure(model, *args, loss=zoo.spec.loss, **kwargs).graph
    assert _temporaries(graph) == _temporaries(measured), f"{name} at batch {batch}"


def test_a_step_run_without_backward_has_the_op_temporaries_found_on_meta() -> None:
    # advise_checkpoints plans from run_step(measure=False): no backward runs, the meta run writes the same attr.
    d, rows = 32, 16
    run = run_step(Step(Cube(d), (_x(rows, d),), {}), measure=False)
    assert run.measured is None
    # pow's 2 S, and w's (rows, d) gradient summed to (d,) by the engine: S; as measure() records them
    s = 4 * rows * d
    assert _temporaries(run.graph) == _temporaries(measure(Cube(d), _x(rows, d)).graph) \
        == Counter({("PowBackward0", 2 * s): 1, ("MulBackward0", s): 1})
