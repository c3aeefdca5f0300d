"""Forecast a step's memory without running it for real: the model and inputs on `meta`, any batch, length, dtype."""

from __future__ import annotations

import copy
import dataclasses
import re
import traceback
import types
import warnings
from collections.abc import Callable
from typing import Any

import torch

from ...analysis.memory import MeasuredMemory, MemoryTimeline, memory_timeline
from ...analysis.memory.fit import StaticBytes
from ...analysis.memory.plan import with_forward_peak
from ...errors import TraceError
from ...model import EdgeKind, Graph, Node, NodeKind, human_bytes
from ..module_trace import given_tensors
from ..torch_internals import fake_mode_and_converter
from .rnn import FUSED_LSTM_NODE, WORKSPACE_NAME, lstm_workspace_bytes
from .step import Step, StepRun, run_step, summed_in_place

__all__ = ["changed_inputs", "Prediction", "meta_model", "resized", "step_variant", "static_bytes", "predict",
           "fake_step", "with_lstm_workspaces"]


@dataclasses.dataclass(frozen=True)
class Prediction:
    """A step's forecast: the whole step, forward and backward, run on `meta` with the same counter
    `measure` uses (`measured`; nothing allocated), and beside it the graph, the timeline replayed from
    it (which explains the peak node by node and answers what-ifs), the bytes that exist anyway, and the
    output node ids backward starts from.

    `peak_bytes` is the headline: the peak counted on meta, or the replay's where the step could not
    run backward there (a note says so).
    """

    graph: Graph
    timeline: MemoryTimeline
    static: StaticBytes
    roots: tuple[str, ...] = ()
    measured: MeasuredMemory | None = None

    @property
    def peak_bytes(self) -> int:
        """The step's forecast peak (bytes; parameters, buffers and the step's inputs left out, as measured)."""
        return self.measured.peak_bytes if self.measured is not None else self.timeline.peak_bytes

    @property
    def sums_in_place(self) -> bool:
        """Whether the step was counted as a plain step sums gradients (`step.summed_in_place`): what a replay of
        `graph` passes to agree with `peak_bytes`."""
        return summed_in_place(self.measured)

    @property
    def notes(self) -> tuple[str, ...]:
        return self.timeline.notes

    def __repr__(self) -> str:
        """One line of figures (the dataclass repr, every step of the timeline and the graph's, runs to pages).

        >>> from graphviz_app.memory import forecast
        >>> forecast(torch.nn.Linear(4, 2), torch.ones(3, 4), batch=1000)  # doctest: +NORMALIZE_WHITESPACE
        <Prediction: peak 7.9 KiB forecast on meta (meta tensors: nothing allocated), the replay of its graph 7.9 KiB;
        besides: parameters 40 B, buffers 0 B, inputs 15.6 KiB; print(p.timeline) for who holds it>
        """
        where = (f"forecast on {self.measured.device} ({'meta' if self.measured.device == 'meta' else 'fake'} "
                 "tensors: nothing allocated)" if self.measured is not None
                 else "the replay's (the step could not run backward there: see .notes)")
        s = self.static
        return (f"<Prediction: peak {human_bytes(self.peak_bytes)} {where}, the replay of its graph "
                f"{human_bytes(self.timeline.peak_bytes)}; besides: parameters {human_bytes(s.params)}, buffers "
                f"{human_bytes(s.buffers)}, inputs {human_bytes(s.inputs)}; print(p.timeline) for who holds it>")


def meta_model(model: torch.nn.Module) -> torch.nn.Module:
    """A copy of `model` whose parameters and buffers live on `meta`: shapes and dtypes, no memory.

    Tied parameters stay tied; the model itself is untouched.

    >>> meta_model(torch.nn.Linear(3, 2)).weight.device
    device(type='meta')
    """
    memo: dict[int, Any] = {}
    for p in model.parameters():
        memo[id(p)] = torch.nn.Parameter(torch.empty_like(p, device="meta"), requires_grad=p.requires_grad)
    for b in model.buffers():
        memo[id(b)] = torch.empty_like(b, device="meta")
    try:
        return copy.deepcopy(model, memo)
    except Exception as e:  # noqa: BLE001 - a module that will not copy: say how to get a meta model anyway
        raise TraceError(
            f"cannot copy {type(model).__name__} to the meta device ({type(e).__name__}: {e}); build the model "
            "on meta yourself (with torch.device('meta'): model = ...) and pass that") from e


def _resize(t: torch.Tensor, dim: int, size: int) -> torch.Tensor:
    if t.dim() <= dim or t.shape[dim] == size:
        return t
    if t.device.type == "meta":
        shape = list(t.shape)
        shape[dim] = size
        return torch.empty(shape, dtype=t.dtype, device="meta", requires_grad=t.requires_grad)
    rows = torch.arange(size, device=t.device) % max(1, t.shape[dim])  # rows repeated or cut
    out = t.detach().index_select(dim, rows)
    return out.requires_grad_(t.requires_grad) if t.is_leaf else out


def resized(value: Any, *, batch: int | None = None, seq_len: int | None = None, device: str | None = None,
            dtype: torch.dtype | None = None) -> Any:
    """`value` (tensors, and tuples, lists and dicts of them) with every tensor's first dimension set to
    `batch`, its second (tensors of two or more dimensions) to `seq_len`, moved to `device` and floating
    tensors cast to `dtype`. On a real device rows are repeated or cut.

    >>> resized((torch.ones(2, 5), [torch.zeros(3)]), batch=4, seq_len=7, device="meta")[0].shape
    torch.Size([4, 7])
    """
    if isinstance(value, torch.Tensor):
        # An input leaf that requires grad stays a leaf (moved or cast, not a copy whose backward would send its
        # gradient back to the original, off meta): backward makes its .grad as the real step does.
        t = value.detach() if value.is_leaf and value.requires_grad else value
        if device is not None and t.device != torch.device(device):
            t = t.to("meta") if device == "meta" else t.to(device)
        if dtype is not None and t.is_floating_point():
            t = t.to(dtype)
        if batch is not None:
            t = _resize(t, 0, batch)
        if seq_len is not None and t.dim() >= 2:
            t = _resize(t, 1, seq_len)
        return t.requires_grad_() if t is not value and value.is_leaf and value.requires_grad else t
    if isinstance(value, dict):
        return {k: resized(v, batch=batch, seq_len=seq_len, device=device, dtype=dtype) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return type(value)(resized(v, batch=batch, seq_len=seq_len, device=device, dtype=dtype) for v in value)
    return value


def step_variant(step: Step, *, batch: int | None = None, seq_len: int | None = None, device: str | None = None,
                 dtype: torch.dtype | None = None, cast: bool = False, policy: str | None = None) -> Step:
    """The same step at another batch size, sequence length, device or dtype.

    `dtype` with `cast` casts the model and inputs (`.half()`, `.to(torch.bfloat16)`); without it the
    forward runs under autocast with that dtype (float32: neither). `device="meta"` copies the model
    to meta (`meta_model`): nothing is allocated. The step's own model is never changed: a cast or a
    move to another real device works on a copy.
    """
    model = step.model
    cast_to = dtype if cast and dtype not in (None, torch.float32) else None
    here = next((p.device for p in model.parameters()), None)
    if device == "meta":
        if here is None or here.type != "meta":
            model = meta_model(model)
        elif cast_to is not None:
            model = copy.deepcopy(model)  # a meta model: the copy allocates nothing
    elif cast_to is not None or (device is not None and here is not None and here != torch.device(device)):
        model = copy.deepcopy(model)  # the person's model stays as it is
        if device is not None:
            model = model.to(device)
    if cast_to is not None:
        model = model.to(cast_to)
    autocast = dtype if dtype not in (None, torch.float32) and not cast else None
    loss = _moved_loss(step.loss, batch=batch, seq_len=seq_len, device=device, dtype=cast_to)
    return Step(
        model,
        resized(step.args, batch=batch, seq_len=seq_len, device=device, dtype=cast_to),
        resized(dict(step.kwargs), batch=batch, seq_len=seq_len, device=device, dtype=cast_to),
        autocast=autocast if autocast is not None else step.autocast,
        autocast_policy=policy or step.autocast_policy,
        loss=loss,
    )


def changed_inputs(given: Step, variant: Step) -> list[str]:
    """Each tensor input whose shape `step_variant` changed (batch, seq_len), as "name (before) -> (after)": what
    to show when the model refuses the resized step.

    >>> x = torch.ones(2, 3)
    >>> changed_inputs(Step(torch.nn.Linear(3, 1), (x,)), step_variant(Step(torch.nn.Linear(3, 1), (x,)), batch=5))
    ['args[0] (2, 3) -> (5, 3)']
    """
    named = [(f"args[{i}]", a, b) for i, (a, b) in enumerate(zip(given.args, variant.args, strict=False))]
    named += [(k, v, variant.kwargs.get(k)) for k, v in given.kwargs.items()]
    return [f"{name} {tuple(a.shape)} -> {tuple(b.shape)}" for name, a, b in named
            if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape != b.shape]


def _moved_loss(loss: Callable[[Any], Any] | None, **how: Any) -> Callable[[Any], Any] | None:
    """`loss` with the tensors it captures (a target: in its closure, or a global it names) resized and moved as
    the step's inputs are: the same function over new cells and globals, the original untouched."""
    if not isinstance(loss, types.FunctionType):
        return loss
    names = {n: loss.__globals__[n] for n in loss.__code__.co_names
             if n in loss.__globals__ and _has_tensor(loss.__globals__[n])}
    scope = {**loss.__globals__, **{n: resized(v, **how) for n, v in names.items()}} if names else loss.__globals__
    cells, changed = [], bool(names)
    for cell in loss.__closure__ or ():
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell (a name bound later)
            cells.append(cell)
            continue
        moved = resized(value, **how) if _has_tensor(value) else value
        changed |= moved is not value
        cells.append(types.CellType(moved))
    if not changed:
        return loss
    return types.FunctionType(loss.__code__, scope, loss.__name__, loss.__defaults__, tuple(cells) or None)


def _has_tensor(value: Any) -> bool:
    if isinstance(value, torch.Tensor):
        return True
    if isinstance(value, dict):
        return any(_has_tensor(v) for v in value.values())
    return isinstance(value, (tuple, list)) and any(_has_tensor(v) for v in value)


def static_bytes(step: Step) -> StaticBytes:
    """Bytes of the model's parameters (trainable ones apart), buffers, and the step's input tensors."""
    params = {id(p): p for p in step.model.parameters()}
    sizes = [(p.numel() * p.element_size(), p.requires_grad) for p in params.values()]
    buffers = sum(b.numel() * b.element_size() for b in step.model.buffers())
    inputs: dict[int, int] = {}
    stack: list[Any] = [step.args, dict(step.kwargs)]
    while stack:
        value = stack.pop()
        if isinstance(value, torch.Tensor):
            inputs[id(value)] = value.numel() * value.element_size()
        elif isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, (tuple, list)):
            stack.extend(value)
    return StaticBytes(
        params=sum(s for s, _ in sizes), trainable=sum(s for s, g in sizes if g), buffers=buffers,
        inputs=sum(inputs.values()),
    )


def _failure(step: Step, e: BaseException) -> TraceError:
    """The error a forward that cannot run says, with what to do: the op without a meta kernel named, the
    value-reading hint only where the forward read a value."""
    devices = {t.device.type for t in given_tensors(step.model, step.args, step.kwargs)}
    where = "meta" if "meta" in devices else ", ".join(sorted(devices)) or "cpu"
    text = str(e)
    first = text.splitlines()[0] if text else type(e).__name__
    hint = ""
    if where == "meta":
        op = re.search(r"(aten|[a-z_]+)::[A-Za-z0-9_.]+", text) or _meta_function(e)
        if re.search(r"item\(\)|data-dependent|Cannot copy out of meta|value of a meta tensor|meta tensors?.*data",
                     text, re.IGNORECASE):
            at = _read_at(e)
            hint = (f"; the forward reads a tensor's value{f' at {at}' if at else ''} (.item(), `if x.sum() > 0`, "
                    "a Python number from a tensor), which meta tensors do not have: forecast on the real device")
            if step.autocast_policy != "cpu":  # fake CPU tensors were not tried: libraries skip such checks there
                hint += (", or on fake CPU tensors, where libraries skip the value checks they skip while tracing "
                         "(transformers' check of position_ids for packed sequences, made when no attention_mask "
                         "is given): policy='cpu' (CLI: --autocast-policy cpu)")
        elif re.search(r"expected device|same device|is on .*device", text):
            hint = ("; a tensor the step uses was not moved to meta with the model and inputs (one the model or the "
                    "loss reads from outside, other than a tensor the loss function captures): pass it as an input "
                    "of the model, or capture it in the loss function")
        elif op is not None and re.search(r"[Mm]eta|fake impl|register_fake|not implemented", text):
            hint = (f"; the op {op.group(0)} has no meta kernel for these inputs in torch {torch.__version__}: "
                    "forecast on the real device (or another dtype)")
        elif op is not None:  # a shape or dtype the op refuses: it would on any device, unless meta lacks something
            hint = (f" (in {op.group(0)}): check the inputs' shapes and dtypes against what the model expects; if the "
                    "step runs as it is on a real device, forecast it there")
        else:
            hint = "; forecast on the real device"
    return TraceError(f"the step failed on {where}: {type(e).__name__}: {first}{hint}")


def _tree(value: Any, leaf: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    if isinstance(value, torch.Tensor):
        return leaf(value)
    if isinstance(value, dict):
        return {k: _tree(v, leaf) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return type(value)(_tree(v, leaf) for v in value)
    return value


def fake_step(step: Step, device: str = "cpu") -> Step:
    """`step` (model and inputs on meta) with every tensor a FakeTensor of `device`: torch then picks the
    kernels it picks on that device (attention, recurrent layers, autocast's casts) and libraries that skip
    value checks for fake tensors (transformers) skip them; nothing is allocated. Tensors the forward or the
    loss captures from outside stay as they are (constants to the fake mode).

    >>> s = fake_step(step_variant(Step(torch.nn.Linear(2, 2), (torch.ones(1, 2),)), device="meta"))
    >>> type(s.args[0]).__name__, s.args[0].device.type
    ('FakeTensor', 'cpu')
    """
    mode, convert = fake_mode_and_converter()
    target = torch.device(device)

    def fake(t: torch.Tensor) -> torch.Tensor:
        meta = t if t.device.type == "meta" else t.detach().to("meta")
        made = convert(mode, meta.detach(), target)
        return made.requires_grad_(t.requires_grad) if t.is_leaf and t.is_floating_point() else made

    memo: dict[int, Any] = {}
    for param in step.model.parameters():
        memo[id(param)] = torch.nn.Parameter(fake(param.detach()), requires_grad=param.requires_grad)
    for buffer in step.model.buffers():
        memo[id(buffer)] = fake(buffer)
    model = copy.deepcopy(step.model, memo)
    return dataclasses.replace(step, model=model, args=_tree(step.args, fake), kwargs=_tree(dict(step.kwargs), fake),
                               mode=mode)


def _read_at(e: BaseException) -> str | None:
    """Where the model's (or its library's) own code was when `e` was raised: the innermost frame outside torch and
    this package, as "path:line (code)", the path from site-packages on when it is there; None if none is."""
    found = None
    for frame in traceback.extract_tb(e.__traceback__):
        path = frame.filename.replace("\\", "/")
        if "/torch/" in path or "/graphviz_app/" in path:
            continue
        short = path.split("site-packages/", 1)[-1]
        found = f"{short}:{frame.lineno}" + (f" ({frame.line.strip()})" if frame.line else "")
    return found


def _meta_function(e: BaseException) -> re.Match[str] | None:
    """The op whose meta function raised `e` ("aten::_grouped_mm" from torch's `meta_grouped_mm`), as a match."""
    tb, found = e.__traceback__, None
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_filename.endswith("_meta_registrations.py") and code.co_name.startswith("meta_"):
            found = code.co_name  # the outermost meta function: the op's own
            break
        tb = tb.tb_next
    return re.search(r".+", f"aten::{found[len('meta_'):]}") if found else None


def predict(step: Step, *, retain_graph: bool = False) -> Prediction:
    """Run the whole step (forward and backward) counted as `measure` counts, trace it, and replay its timeline.

    On `meta` nothing is allocated: the count is of the sizes the ops return. Where
    backward cannot run there (an op's backward without a meta kernel), the forward is
    traced alone and the headline is the replay's, with a note.

    Raises:
        TraceError: the forward cannot run there (an op without a meta kernel, named; a
            forward reading a tensor's value).
    """
    note = None
    on_meta = any(t.device.type == "meta" for t in given_tensors(step.model, step.args, step.kwargs))
    lstm = any(isinstance(m, torch.nn.LSTM) for m in step.model.modules())  # its workspace is sized on meta only
    if on_meta and step.autocast_policy == "cpu" and not lstm:
        # Fake CPU tensors: CPU's own kernel choices, exact where MemTracker under FakeTensorMode is; where the
        # step cannot run on them (a value read that meta tolerates), on meta as below.
        try:
            fake = fake_step(step)
            with warnings.catch_warnings():  # the walker reads storages' addresses (0 on fake tensors): expected
                warnings.filterwarnings("ignore", message="Accessing the data pointer of FakeTensor")
                run = run_step(fake, retain_graph=retain_graph)
            forward = run.measured.forward_peak_bytes if run.measured is not None else None
            graph = _carrying(with_lstm_workspaces(run.graph), run.roots, forward)
            timeline = memory_timeline(graph, roots=run.roots, retain_graph=retain_graph, forward_peak_bytes=forward,
                               sums_in_place=run.sums_in_place)
            plain = _plain_step_note(timeline, run, graph, retain_graph, forward)
            timeline = dataclasses.replace(timeline, notes=(*timeline.notes, "forecast on fake CPU tensors "
                                                            "(FakeTensorMode): nothing allocated", *plain))
            return Prediction(graph, timeline, static_bytes(step), run.roots, run.measured)
        except Exception as e:  # noqa: BLE001 - any failure on fake tensors: the meta path below, with a note
            note = f"fake CPU tensors failed ({type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}): " \
                   "counted on meta"
    backward_note = None
    try:
        run = run_step(step, retain_graph=retain_graph)
    except (NotImplementedError, RuntimeError, TypeError) as e:
        try:
            run = run_step(step, measure=False)
        except (NotImplementedError, RuntimeError, TypeError) as e2:
            raise _failure(step, e2) from e2
        backward_note = f"backward could not run here ({_failure(step, e)}): the forecast is the replay's"
    forward = run.measured.forward_peak_bytes if run.measured is not None else None
    graph = _carrying(with_lstm_workspaces(run.graph), run.roots, forward)
    timeline = memory_timeline(graph, roots=run.roots, retain_graph=retain_graph, forward_peak_bytes=forward,
                               sums_in_place=run.sums_in_place)
    fused = any(n.name == FUSED_LSTM_NODE for n in graph.nodes)
    rnns = sorted({type(m).__name__ for m in step.model.modules()
                   if isinstance(m, torch.nn.RNNBase) and not (fused and isinstance(m, torch.nn.LSTM))})
    notes: list[str] = [n for n in (note, backward_note) if n]
    notes += _plain_step_note(timeline, run, graph, retain_graph, forward)
    if on_meta and fused:
        notes.append("LSTM on meta runs the CPU's fused oneDNN kernel, in its dtype (float32, or bfloat16 under "
                     "autocast); its workspace is sized from oneDNN's layout (rnn_utils.hpp, oneDNN 3.12 in torch "
                     "2.13; to the byte on the shapes checked) and counted from the layer's forward to its backward")
    if on_meta and rnns:
        notes.append(f"{', '.join(rnns)} on meta runs torch's step-by-step cell, whose saved tensors are counted; "
                     "on CPU and CUDA torch runs a fused kernel (oneDNN, cuDNN) that saves others: forecast it on "
                     "the real device")
    if notes:
        timeline = dataclasses.replace(timeline, notes=(*timeline.notes, *notes))
    return Prediction(graph, timeline, static_bytes(step), run.roots, run.measured)


def _plain_step_note(timeline: MemoryTimeline, run: StepRun, graph: Graph, retain_graph: bool,
                     forward_peak: int | None) -> list[str]:
    """A note where a plain step would peak lower: counted under a dispatch mode (as here, and as MemTracker
    counts) torch sums a tensor's gradients into a new tensor each time, while a plain step sums them in place where
    it may (a tied weight's); `timeline` was replayed as counted, and the replay summing in place says by how much
    (torch.profiler's record of a plain step agrees: tests/memory/test_memory_plain_step.py). No note within 1%."""
    if run.sums_in_place:
        return []
    plain = memory_timeline(graph, roots=run.roots, retain_graph=retain_graph, forward_peak_bytes=forward_peak,
                            sums_in_place=True).peak_bytes
    if plain >= 0.99 * timeline.peak_bytes:
        return []
    return [f"counted under a dispatch mode, as MemTracker counts, where torch sums a tensor's gradients into a new "
            f"tensor; a plain step (no mode on: a CUDA step read by torch.cuda.max_memory_allocated) sums them in "
            f"place where it may, and replayed so this step peaks at {human_bytes(plain)} "
            f"({1 - plain / timeline.peak_bytes:.1%} lower)"]


def _carrying(graph: Graph, roots: tuple[str, ...], forward_peak: int | None) -> Graph:
    """The graph with the forward's peak counted on its roots (saved and loaded with it), when it was counted."""
    return graph if forward_peak is None else with_forward_peak(graph, roots, forward_peak)


def with_lstm_workspaces(graph: Graph) -> Graph:
    """`graph` with any empty workspace a fused LSTM layer saved on meta sized as the CPU kernel allocates it
    (`lstm_workspace_bytes`, from the layer's saved input, hidden state and dtype); `meta_lstm` sizes them as it
    runs, so this is for a layer torch's own meta kernel ran outside it."""
    saved: dict[str, dict[str, Node]] = {}
    by_id = {n.id: n for n in graph.nodes}
    for e in graph.edges:
        if e.kind is EdgeKind.SAVED:
            op, kept = by_id[e.dst], by_id[e.src]
            if op.kind is not NodeKind.OP:
                op, kept = kept, op
            if op.name == FUSED_LSTM_NODE:
                saved.setdefault(op.id, {})[kept.name] = kept
    sized: dict[str, Node] = {}
    for layer in saved.values():
        ws, x, h = layer.get(WORKSPACE_NAME), layer.get("input"), layer.get("hx_")
        if ws is None or ws.tensor is None or ws.tensor.device != "meta" or ws.tensor.numel:
            continue
        if x is None or x.tensor is None or h is None or h.tensor is None or len(x.tensor.shape) != 3:
            continue
        steps, batch, width = x.tensor.shape
        dtype = getattr(torch, x.tensor.dtype, None)
        if dtype not in (torch.float32, torch.bfloat16):
            continue  # the fused kernel trains in no other dtype
        size = lstm_workspace_bytes(steps, batch, width, h.tensor.shape[-1], dtype)
        tensor = dataclasses.replace(ws.tensor, shape=(size,), numel=size, bytes=size, storage_bytes=size)
        sized[ws.id] = dataclasses.replace(ws, tensor=tensor)
    if not sized:
        return graph
    return dataclasses.replace(graph, nodes=tuple(sized.get(n.id, n) for n in graph.nodes))
