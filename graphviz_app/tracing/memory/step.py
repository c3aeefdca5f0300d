"""Run one training step of a model: trace its graph, and measure the bytes alive as each backward node runs."""

from __future__ import annotations

import contextlib
import dataclasses
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from ...analysis.memory import MeasuredMemory, MemoryStep
from ...errors import NoGradFnError, TraceError
from ...model import Graph
from ..big_stack import call_with_large_stack
from ..module_trace import given_tensors
from ..param_owners import all_named_params, first_names
from ..recorder import record
from ..thread_state import callers_autocast_dtype
from ..walker import Walker, WalkOptions
from .attention import meta_attention
from .autocast import MetaAutocast
from .counting import LiveCuda, LiveStorages
from .grouped_mm import meta_grouped_mm
from .op_temporaries import mark_meta_op_temporaries
from .recompute import mark_recomputed
from .reentrant import mark_reentrant_keeps, name_reentrant_blocks
from .rnn import meta_lstm
from .temporaries import OpBytes, mark_op_bytes, watch_op_bytes

__all__ = ["Step", "StepRun", "run_step", "step_outputs", "summed_in_place"]


@dataclass(frozen=True)
class Step:
    """What one step runs: `model(*args, **kwargs)`, then backward from its loss.

    The loss is the output if it is a scalar, its sum if not, the `loss` of an
    output object that has one; with several tensor outputs, backward starts
    from every one of them (their sums). `autocast` runs the forward under
    `torch.autocast` with that dtype (float16, bfloat16) on the inputs' device;
    on `meta`, which torch.autocast leaves alone, under `MetaAutocast` with the
    `autocast_policy` of "cuda" or "cpu" (which ops run in which precision).
    `loss`, when given, is a function of the output (`lambda out: out.logits.sum()`):
    backward runs from what it returns, by the same rules.
    """

    model: torch.nn.Module
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    autocast: torch.dtype | None = None
    autocast_policy: str = "cuda"
    loss: Callable[[Any], Any] | None = None
    mode: Any = None  # a FakeTensorMode the step's tensors belong to: entered on the thread that runs it


@dataclass(frozen=True)
class StepRun:
    """The graph of a step (with `TensorInfo.given` marked), the output node ids backward starts
    from, and what the step measured (None when not measured)."""

    graph: Graph
    roots: tuple[str, ...]
    measured: MeasuredMemory | None

    @property
    def sums_in_place(self) -> bool:
        """Whether backward ran as a plain step does (`summed_in_place`)."""
        return summed_in_place(self.measured)


def summed_in_place(measured: MeasuredMemory | None) -> bool:
    """Whether the step `measured` counted ran backward as a plain step does, summing gradients in place where
    torch may: False when it was counted under a dispatch mode (on CPU, meta or fake tensors), where torch always
    sums into a new tensor (`memory_timeline(..., sums_in_place=)` replays the same); True when not counted."""
    return measured is None or measured.method == "cuda"


def step_outputs(outputs: Any) -> tuple[list[tuple[str, torch.Tensor]], list[str]]:
    """The tensors a forward returned, named as `trace` names them, and the paths backward starts from.

    Tuples, lists, mappings and dataclass fields are opened (an output object's
    logits are held by the user while backward runs, as its loss is), and so are
    the attributes of other plain objects (a transformers `Cache` holding every
    layer's keys and values): tensors found there are held, never started from.

    >>> named, roots = step_outputs((torch.ones(2, requires_grad=True) * 2, 3))
    >>> [path for path, _ in named], roots
    (['output[0]'], ['output[0]'])
    """
    named: list[tuple[str, torch.Tensor]] = []
    held: set[str] = set()  # paths found through a plain object's attributes
    seen: set[int] = set()
    loss = getattr(outputs, "loss", None)
    if isinstance(loss, torch.Tensor) and loss.grad_fn is not None and not isinstance(outputs, Mapping):
        named.append(("output.loss", loss))
        seen.add(id(loss))
    stack: list[tuple[str, Any, bool]] = [("output", outputs, False)]
    walked: set[int] = set()  # containers already opened: an object that refers to itself is opened once
    while stack:
        path, value, inside = stack.pop()
        if not isinstance(value, torch.Tensor):
            if id(value) in walked:
                continue
            walked.add(id(value))
        if isinstance(value, torch.Tensor):
            if value.grad_fn is not None and id(value) not in seen:
                seen.add(id(value))
                named.append((path, value))
                if inside:
                    held.add(path)
        elif isinstance(value, Mapping):
            stack.extend((f"{path}[{k!r}]", v, inside) for k, v in reversed(list(value.items())))
        elif isinstance(value, (tuple, list)):
            stack.extend((f"{path}[{i}]", v, inside) for i, v in reversed(list(enumerate(value))))
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            # An output object's other fields (logits) are held by the user during backward too.
            stack.extend((f"{path}.{f.name}", getattr(value, f.name, None), inside)
                         for f in reversed(dataclasses.fields(value)))
        elif _plain_object(value):
            stack.extend((f"{path}.{k}", v, True) for k, v in reversed(list(vars(value).items())))
    if not named:
        raise NoGradFnError(
            f"the step's output ({type(outputs).__name__}) holds no tensor with a grad_fn: nothing to run backward "
            "from; the model's parameters must require grad, and the forward must not run under no_grad")
    losses = [p for p, t in named if p.endswith((".loss", "['loss']")) and t.dim() == 0]
    return named, losses[:1] or [p for p, _ in named if p not in held] or [p for p, _ in named]


def _plain_object(value: Any) -> bool:
    """An instance of a user's or library's own class with attributes (not a module, class, function or tensor)."""
    return (hasattr(value, "__dict__") and not isinstance(value, (torch.nn.Module, type, types.ModuleType))
            and not callable(value))


def _named_outputs(outputs: Any, loss: Any) -> tuple[list[tuple[str, torch.Tensor]], list[str]]:
    """Without a `loss` function, `step_outputs(outputs)`. With one, backward starts from what it returned
    ("loss"), and the model's outputs are held by the user while backward runs, as in
    `out = model(x); loss_fn(out).backward()`."""
    if loss is None:
        return step_outputs(outputs)
    named, roots = step_outputs(loss)
    named = [("loss" + path[len("output"):], t) for path, t in named]
    roots = ["loss" + path[len("output"):] for path in roots]
    try:
        held, _ = step_outputs(outputs)
    except NoGradFnError:
        held = []
    seen = {id(t) for _, t in named}
    return named + [(path, t) for path, t in held if id(t) not in seen], roots


def _walk(step: Step, named: list[tuple[str, torch.Tensor]], saved: bool) -> tuple[Graph, dict[str, Any]]:
    params = all_named_params(step.model)
    leaf_names = {id(t): (name, t) for name, t in first_names(params)}
    options = WalkOptions(
        leaf_names=leaf_names, root_module=step.model, module_params=params,
        module_param_ids=frozenset(leaf_names), given=given_tensors(step.model, step.args, step.kwargs),
        show_saved=saved, show_attrs=saved,
    )
    notes: list[str] = []
    with Walker(options, notes) as walker:
        graph = walker.walk(named)
        fns = walker.fn_by_node_id()
        graph = mark_recomputed(graph, fns, walker.describe.known_storage, options.given)
        return mark_reentrant_keeps(graph, fns, walker.describe.known_storage, options.given), fns


def _device_type(step: Step) -> str:
    """The device type of the step's first parameter or input ("cpu" when it has none)."""
    devices = [t.device.type for t in given_tensors(step.model, step.args, step.kwargs)]
    return devices[0] if devices else "cpu"


def _autocast(step: Step) -> contextlib.AbstractContextManager[Any]:
    if step.autocast is None:
        return contextlib.nullcontext()
    device = _device_type(step)
    if device == "meta":
        return MetaAutocast(step.autocast, step.autocast_policy)
    return torch.autocast(device, dtype=step.autocast)


def _attention(step: Step) -> contextlib.AbstractContextManager[Any]:
    """On meta, attention runs the fused kernel the target device (`autocast_policy`) would pick."""
    devices = {t.device.type for t in given_tensors(step.model, step.args, step.kwargs)}
    return meta_attention(step.autocast_policy) if devices == {"meta"} else contextlib.nullcontext()


def _recurrent(step: Step) -> contextlib.AbstractContextManager[Any]:
    """On meta, an LSTM runs the fused kernel the target device (`autocast_policy`) runs, where one is modelled."""
    if step.autocast_policy != "cpu" or not any(isinstance(m, torch.nn.LSTM) for m in step.model.modules()):
        return contextlib.nullcontext()  # no torch-function mode on every op of a model without one
    devices = {t.device.type for t in given_tensors(step.model, step.args, step.kwargs)}
    return meta_lstm(step.autocast_policy) if devices == {"meta"} else contextlib.nullcontext()


def _grouped(step: Step) -> contextlib.AbstractContextManager[Any]:
    """On meta and fake tensors, grouped matmuls (MoE layers) in any dtype, as the CPU kernel runs them."""
    return meta_grouped_mm() if _shape_only(step) else contextlib.nullcontext()


def _in_backward(step: Step) -> contextlib.ExitStack:
    """What the forward ran under that backward needs too, on meta and fake tensors: a grouped matmul's backward
    is grouped matmuls, and a non-reentrant checkpoint's recompute runs the block's forward again, which must
    take the attention kernel the forward took (else it saves other tensors and torch's checkpoint raises). Only
    these two reach backward: the engine runs it without the caller's torch-function modes (MetaAutocast,
    meta_lstm, the default device), while dispatch modes and the replaced attention function stay."""
    stack = contextlib.ExitStack()
    if _shape_only(step):
        stack.enter_context(_attention(step))
        stack.enter_context(_grouped(step))
    return stack


def _shape_only(step: Step) -> bool:
    devices = {t.device.type for t in given_tensors(step.model, step.args, step.kwargs)}
    return step.mode is not None or devices == {"meta"}


def _default_device(step: Step) -> contextlib.AbstractContextManager[Any]:
    """On meta, tensors the forward makes without a device (torch.zeros(n)) are made on meta too."""
    devices = {t.device.type for t in given_tensors(step.model, step.args, step.kwargs)}
    return torch.device("meta") if devices == {"meta"} else contextlib.nullcontext()


def _counter(step: Step) -> LiveStorages | LiveCuda:
    devices = {t.device for t in given_tensors(step.model, step.args, step.kwargs)}
    cuda = [d for d in devices if d.type == "cuda"]
    return LiveCuda(cuda[0]) if cuda else LiveStorages()


def _run(step: Step, measure: bool, retain_graph: bool, saved: bool) -> StepRun:
    if step.mode is None:
        return _run_here(step, measure, retain_graph, saved)
    with step.mode:  # modes are per thread: the fake mode is entered on the big-stack thread
        return _run_here(step, measure, retain_graph, saved)


def _run_here(step: Step, measure: bool, retain_graph: bool, saved: bool) -> StepRun:
    counter = _counter(step) if measure else None
    with counter if counter is not None else contextlib.nullcontext():
        with record(step.model), _attention(step), _recurrent(step), _autocast(step), _default_device(step), \
                _grouped(step), torch.enable_grad():
            outputs = step.model(*step.args, **step.kwargs)
            loss = step.loss(outputs) if step.loss is not None else None
        forward_peak = counter.peak if counter is not None else 0
        named, root_paths = _named_outputs(outputs, loss)
        if counter is not None:
            counter.paused = True
        graph, fns = _walk(step, named, saved)
        graph = name_reentrant_blocks(graph, fns, step.model)
        roots = tuple(n.id for n in graph.nodes if n.kind.value == "output" and n.name in root_paths)
        if counter is None:  # no backward runs: each op's temporaries found on meta instead
            return StepRun(mark_meta_op_temporaries(graph, fns), roots, None)
        op_bytes = OpBytes()
        handles = watch_op_bytes(counter, fns, graph, op_bytes)
        del fns
        counter.paused = False
        counter.mark(None)
        tensors = [t for p, t in named if p in root_paths]
        grads = [torch.ones((), dtype=t.dtype, device=t.device).expand(t.shape) for t in tensors]
        try:
            with _in_backward(step):
                torch.autograd.backward(tensors, grads, retain_graph=retain_graph)
        finally:
            for h in handles:
                h.remove()
        del tensors, grads, outputs, loss, named
    graph = mark_op_bytes(graph, op_bytes)
    steps = tuple(MemoryStep(label, before, peak, after) for label, before, peak, after in counter.marks)
    device = counter.device if isinstance(counter, LiveCuda) else _device_of(step)
    method = "cuda" if isinstance(counter, LiveCuda) else "storages"
    measured = MeasuredMemory(steps, counter.peak, forward_peak, method, str(device))
    return StepRun(graph, roots, measured)


def _device_of(step: Step) -> str:
    tensors = given_tensors(step.model, step.args, step.kwargs)
    return str(tensors[0].device) if tensors else "cpu"


def run_step(step: Step, *, measure: bool = True, retain_graph: bool = False, trace_saved: bool = True) -> StepRun:
    """Run `step` once: forward under `record`, trace its graph, then (with `measure`) backward, measured.

    Measured on CPU (and `meta`) by counting every storage an op allocates
    while it lives (`LiveStorages`), on CUDA by the allocator's counters
    (`LiveCuda`); either way tensors that existed before the step do not
    count. The measured steps carry the graph's node ids. Runs on a big-stack
    thread, as `trace_model` does; the step's tensors are freed there. The step
    starts with no `.grad` (as after `zero_grad()`); the parameters' own `.grad`
    are put back afterwards, so the model is as it was. `trace_saved=False`
    traces no saved tensor (reading one may run code: a checkpointed module
    recomputes its forward).

    Raises:
        TraceError: the model is not an nn.Module.
        NoGradFnError: no output has a graph to run backward from.
    """
    if not isinstance(step.model, torch.nn.Module):
        raise TraceError(f"a step runs an nn.Module, got a {type(step.model).__name__}")
    if step.autocast is None and (dtype := callers_autocast_dtype(_device_type(step))) is not None:
        step = dataclasses.replace(step, autocast=dtype)  # the caller's autocast, for the forward (thread_state)
    params = list(step.model.parameters())
    kept = [p.grad for p in params]
    for p in params:  # a step starts from zero_grad(set_to_none=True): backward makes every .grad
        p.grad = None
    try:
        return call_with_large_stack(_run, step, measure, retain_graph, trace_saved)
    finally:
        for p, grad in zip(params, kept, strict=True):
            p.grad = grad
