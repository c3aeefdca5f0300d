"""memory_timeline: exact bytes on hand-computed cases, and within 10% of a measured step on five models."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

import pytest
import torch
from mem_models import MODELS, Fn

from graphviz_app import trace, trace_model
from graphviz_app.analysis.memory import MemoryStep, MemoryTimeline, memory_timeline
from graphviz_app.model import Graph
from graphviz_app.tracing.memory.step import Step, run_step


def _vector() -> torch.Tensor:
    return torch.arange(4.0, requires_grad=True)  # a leaf: 16 bytes that never count


def _square() -> torch.Tensor:
    return torch.arange(16.0).reshape(4, 4).requires_grad_()  # 64 bytes


def _chain(x: torch.Tensor) -> torch.Tensor:
    return x.exp().exp().sum()


def _view(x: torch.Tensor) -> torch.Tensor:
    b = (x * x)[:1]  # a 16-byte view of a 64-byte product
    return (b * b).sum()  # saves the view: the whole product stays alive


def _in_place(x: torch.Tensor) -> torch.Tensor:
    a = x * x
    a.relu_()  # no new memory: ReluBackward0 saves a's own storage
    return a.sum()


def _accumulated(w: torch.Tensor, steps: int = 3) -> torch.Tensor:
    total = torch.zeros(())  # 4 bytes, made in the step
    for k in range(steps):
        xk = torch.full((4,), float(k + 1))  # 16 bytes, saved by the product
        total = total + (w * xk).exp().sum()  # exp's 16-byte result saved too: 32 bytes kept per step
    return total


def _non_scalar(x: torch.Tensor) -> torch.Tensor:
    return x.exp()  # the step runs backward from its sum: a one-element gradient expanded to x's shape


# name, function, its input, retain_graph, peak, bytes alive at the end of the forward.
HAND_CASES: list[tuple[str, Callable[..., torch.Tensor], Callable[[], torch.Tensor], bool, int, int]] = [
    # forward end: two exp results (16 + 16), the loss (4) and its gradient (4) = 40; each ExpBackward0
    # makes a 16-byte gradient before its saved result goes: 40 + 16 = 56.
    ("chain", _chain, _vector, False, 56, 40),
    # retain_graph keeps both results: the second ExpBackward0 runs with 56 alive and makes 16 more.
    ("chain, retain_graph", _chain, _vector, True, 72, 40),
    # forward end: the 64-byte product (kept by the saved view) + loss + gradient = 72. The last
    # MulBackward0 holds the 64-byte gradient of the product and makes two 64-byte gradients of x: 200.
    ("view keeps its base", _view, _square, False, 200, 72),
    # relu_ saves the product's storage in place: 72 at the end of the forward; ReluBackward0 makes 64
    # (136), MulBackward0 then holds 64 and makes 2 x 64 (200).
    ("in-place op", _in_place, _square, False, 200, 72),
    # three steps keep 3 x 32 bytes; the running total (4) and its gradient (4): 104; the first exp's
    # backward makes 16 bytes on top of it.
    ("loss accumulated over 3 steps", _accumulated, _vector, False, 120, 104),
    # forward end: the output (16, also saved as exp's result) and its 4-byte expanded gradient = 20;
    # ExpBackward0 makes x's 16-byte gradient: 36.
    ("a non-scalar output: backward from its sum", _non_scalar, _vector, False, 36, 20),
]


def _run(module: torch.nn.Module, *inputs: Any, retain_graph: bool = False) -> tuple[MemoryTimeline, Any]:
    run = run_step(Step(module, inputs), retain_graph=retain_graph)
    return memory_timeline(run.graph, roots=run.roots, retain_graph=retain_graph), run


@pytest.mark.parametrize(("name", "f", "make", "retain", "peak", "forward"), HAND_CASES, ids=[c[0] for c in HAND_CASES])
def test_hand_computed_bytes_are_predicted_and_measured_exactly(
    name: str, f: Callable[..., torch.Tensor], make: Callable[[], torch.Tensor], retain: bool, peak: int, forward: int,
) -> None:
    predicted, run = _run(Fn(f), make(), retain_graph=retain)
    assert (predicted.peak_bytes, predicted.forward_bytes) == (peak, forward)
    assert (run.measured.peak_bytes, run.measured.forward_bytes) == (peak, forward)


def test_every_backward_node_matches_the_measured_step() -> None:
    predicted, run = _run(Fn(_in_place), _square())
    names = [(run.graph.node(s.node).name if s.node else None) for s in predicted.steps]
    assert names == [None, "SumBackward0", "ReluBackward0", "MulBackward0", ""]
    # (before, peak, after) of each step; the last is x's AccumulateGrad taking the gradient as .grad
    assert [(s.before, s.peak, s.after) for s in predicted.steps] == [
        (72, 72, 72), (72, 72, 72), (72, 136, 72), (72, 200, 72), (72, 72, 72)]
    measured = [(s.node, s.peak) for s in run.measured.steps]
    assert measured == [(s.node, s.peak) for s in predicted.steps]
    assert predicted.peak_node == run.measured.peak_node == predicted.steps[3].node


def _saved_by_several(x: torch.Tensor) -> torch.Tensor:
    h = x.exp()  # 16 bytes saved by ExpBackward0 (its result), by h * h (twice) and by sin: one storage, kept once
    return (h * h + h.sin()).sum()


def test_one_storage_saved_by_several_ops_and_twice_by_one_is_held_once_until_its_last_saver() -> None:
    predicted, run = _run(Fn(_saved_by_several), _vector())
    names = [(run.graph.node(s.node).name if s.node else None) for s in predicted.steps]
    assert names == [None, "SumBackward0", "AddBackward0", "SinBackward0", "MulBackward0", "ExpBackward0", ""]
    # The end of the forward: h (16), the loss and its gradient (4 + 4) = 24. Sum and Add pass the 4-byte gradient
    # on as views. SinBackward0 makes cos(h) and h's gradient (16 + 16: 56), keeps the gradient (40); h * h's
    # backward makes two gradients of h (72) and sums them into the one waiting, in place (40); h is freed after
    # ExpBackward0, which makes x's gradient (56), and x's AccumulateGrad takes it.
    assert [(s.before, s.peak, s.after) for s in predicted.steps] == [
        (24, 24, 24), (24, 24, 24), (24, 24, 24), (24, 56, 40), (40, 72, 40), (40, 56, 24), (24, 24, 24)]
    # Under a TorchDispatchMode (measure's run) torch sums into a new tensor: 16 more at h * h's backward
    in_mode = memory_timeline(run.graph, roots=run.roots, sums_in_place=False)
    assert in_mode.peak_bytes == run.measured.peak_bytes == 88
    assert [s.peak for s in in_mode.steps] == [s.peak for s in run.measured.steps]


def test_a_loss_accumulated_without_item_keeps_32_bytes_per_step() -> None:
    kept = [memory_timeline(trace(_accumulated(_vector(), steps))).forward_bytes for steps in (1, 2, 3, 4)]
    assert [b - a for a, b in zip(kept, kept[1:], strict=False)] == [32, 32, 32]


@pytest.mark.parametrize("name", sorted(MODELS))
def test_predicted_peak_within_10_percent_of_the_measured_one(name: str) -> None:
    torch.manual_seed(0)
    make_model, make_inputs = MODELS[name]
    predicted, run = _run(make_model(), *make_inputs(8))
    measured = run.measured.peak_bytes
    assert abs(predicted.peak_bytes - measured) <= 0.10 * measured, (predicted.peak_bytes, measured)
    assert predicted.forward_bytes == pytest.approx(run.measured.forward_bytes, rel=0.10)


def test_inputs_and_buffers_do_not_count() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(100, 10), torch.nn.BatchNorm1d(10))
    x = torch.randn(50, 100)  # 20,000 bytes, saved by the Linear
    traced_with_inputs = memory_timeline(trace_model(model, x))
    plain = memory_timeline(trace(model(x), model))  # trace() does not know x existed before the step
    # the running mean and variance (40 bytes each) are buffers: given too
    assert plain.forward_bytes - traced_with_inputs.forward_bytes == 20_000 + 2 * 40


def test_the_timeline_is_json_ready_and_reads_the_same_from_a_graph_file() -> None:
    graph = trace_model(MODELS["mlp"][0](), torch.randn(4, 128))
    timeline = memory_timeline(graph)
    data = json.loads(json.dumps(timeline.to_dict()))
    assert data["peak_bytes"] == timeline.peak_bytes and data["peak_node"] == timeline.peak_node
    assert len(data["steps"]) == len(timeline.steps) and data["steps"][0][0] is None
    assert sum(data["held_at_peak"].values()) == timeline.peak_bytes
    assert sum(m["saved"] + m["gradients"] + m["grads"] + m["outputs"] for m in data["at_peak"]) == timeline.peak_bytes
    assert memory_timeline(Graph.from_json(graph.to_json())) == timeline


def test_what_is_alive_at_the_peak_is_grouped_by_module() -> None:
    torch.manual_seed(0)
    timeline = memory_timeline(trace_model(MODELS["mlp"][0](), torch.randn(64, 128)))
    rows = {m.module: m for m in timeline.at_peak}
    assert sum(m.total for m in rows.values()) == timeline.peak_bytes
    assert set(rows) <= {"", "0", "1", "2", "3", "4"}
    assert rows["4"].grads > 0  # the last Linear's .grad is made before the first Linear's backward


def test_roots_must_be_outputs() -> None:
    graph = trace(_chain(_vector()))
    with pytest.raises(ValueError, match="roots must be output node ids of the graph; n1 are not"):
        memory_timeline(graph, roots=["n1"])


def test_a_graph_without_saved_tensors_says_so() -> None:
    timeline = memory_timeline(trace(_chain(_vector()), show_saved=False))
    assert any("no saved tensor in the graph" in note for note in timeline.notes)


def test_module_summary_gives_the_bytes_each_module_holds_at_the_peak() -> None:
    torch.manual_seed(0)
    graph = trace_model(MODELS["encoder"][0](), torch.randn(8, 12, 64))
    rows = {r.module: r for r in graph.module_summary()}
    timeline = memory_timeline(graph)
    inside = sum(m.total for m in timeline.at_peak if m.module is not None)
    assert rows[""].peak_bytes == inside > 0  # the root holds what every module holds
    layers = [rows[f"encoder.layers.{i}"].peak_bytes or 0 for i in range(2)]
    assert rows["encoder.layers"].peak_bytes == sum(layers) + sum(
        m.total for m in timeline.at_peak if m.module == "encoder.layers")


@dataclasses.dataclass
class _Output:
    """A model output object: backward starts from its loss; its logits stay held by the caller."""

    loss: torch.Tensor
    logits: torch.Tensor


class _WithOutputObject(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(8, 50)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> _Output:
        logits = self.fc(x)  # 64 x 50 floats: 12,800 bytes nobody saves but the caller holds
        return _Output(torch.nn.functional.cross_entropy(logits, y), logits)


def test_an_output_object_runs_backward_from_its_loss_and_holds_its_other_tensors() -> None:
    torch.manual_seed(0)
    predicted, run = _run(_WithOutputObject(), torch.randn(64, 8), torch.randint(0, 50, (64,)))
    outputs = {n.id: n.name for n in run.graph.nodes if n.kind.value == "output"}
    assert sorted(outputs.values()) == ["output.logits", "output.loss"]
    assert [outputs[r] for r in run.roots] == ["output.loss"]
    # the logits (12,800), cross_entropy's saved log-softmax (12,800), nll_loss's saved total weight,
    # the loss and its gradient (4 + 4 + 4)
    assert predicted.forward_bytes == run.measured.forward_bytes == 12_800 + 12_800 + 12
    assert predicted.peak_bytes == run.measured.peak_bytes


def test_a_loss_function_of_the_output_is_where_backward_starts() -> None:
    model = Fn(lambda x: {"y": x.exp()})
    # backward from y.sum() as the step's own rule: y (16, exp's saved result) and its expanded 4-byte
    # gradient = 20; ExpBackward0 makes 16.
    plain, plain_run = _run(model, _vector())
    assert (plain.forward_bytes, plain.peak_bytes, plain_run.measured.peak_bytes) == (20, 36, 36)
    # with loss=: the dict is dropped, the loss (4) and its gradient (4) stay beside y: 24, then + 16.
    run = run_step(Step(model, (_vector(),), loss=lambda out: out["y"].sum()))
    timeline = memory_timeline(run.graph, roots=run.roots)
    assert [run.graph.node(r).tensor.shape for r in run.roots] == [()]
    assert (timeline.forward_bytes, timeline.peak_bytes, run.measured.peak_bytes) == (24, 40, 40)


def _uneven_split(x: torch.Tensor) -> torch.Tensor:
    q, k = (x * x).split([12, 4])  # a 48-byte and a 16-byte output of one op
    return q.exp().sum() + k.exp().sum()


def test_an_uneven_split_sends_each_output_a_gradient_of_its_own_size() -> None:
    # forward end: the two exp results (48 + 16), the loss (4) and its gradient (4) = 72. The first
    # ExpBackward0 to run (k's, made last) makes 16 bytes for k, not q's 48: 88.
    predicted, run = _run(Fn(_uneven_split), torch.arange(16.0, requires_grad=True))
    split = next(n for n in run.graph.nodes if n.name == "SplitWithSizesBackward0")
    assert split.output_bytes == (48, 16)
    assert [(s.node and run.graph.node(s.node).name, s.peak) for s in predicted.steps][:4] == [
        (None, 72), ("AddBackward0", 72), ("SumBackward0", 72), ("ExpBackward0", 88)]
    assert predicted.peak_bytes == run.measured.peak_bytes


def test_the_readme_example_prints_what_the_readme_shows(capsys: pytest.CaptureFixture[str]) -> None:
    from manual import manual_text

    text = manual_text()
    section = text.split("<!-- section: memory (owner: memory) -->")[1].split("<!-- end: memory -->")[0]
    example = section.split("```python\n")[1].split("```")[0]
    exec(compile(example, "README.md memory", "exec"), {})  # noqa: S102
    shown = section.split('```text title="Output"\n')[1].split("```")[0]
    assert capsys.readouterr().out == shown


def test_the_replays_steps_are_plain_memory_steps() -> None:
    # The replay fills its steps in without MemoryStep's frozen __init__ (for speed): they must be the same records.
    timeline = memory_timeline(trace(_chain(_vector()), show_saved=True))
    step = timeline.steps[1]
    made = MemoryStep(step.node, step.before, step.peak, step.after)
    assert type(step) is MemoryStep and step == made and hash(step) == hash(made)
    assert dataclasses.replace(step, peak=1) == MemoryStep(step.node, step.before, 1, step.after)
    with pytest.raises(dataclasses.FrozenInstanceError):
        step.peak = 1  # type: ignore[misc]
