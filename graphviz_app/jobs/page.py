"""The page's jobs, run inside its worker processes: program in, plain results out.

Each job is a top-level function (so it pickles by name), takes plain
arguments and returns an `Analysis`/`GradientCheck`/bytes or a `Failure`;
no tensor ever leaves the worker. The server names them with `JobRef`s
(`graphviz_app.web.service`) and never imports this package, which loads torch.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch

from gradcheck import GradcheckError

from ..errors import GraphvizAppError
from ..expr.errors import ExprError
from ..expr.validator import parse
from ..web.results import (
    Analysis,
    CheckModes,
    Failure,
    GradientCheck,
    TensorValue,
    Tolerances,
)
from ..web.urlstate import Options
from .checking import CheckRequest, check_program
from .page_gradients import origin_statement, page_notes
from .programs import TraceOptions, trace_program
from .viewing import depth_note, module_rows, viewer_data

__all__ = ["analysis_job", "check_job", "devices_job", "trace_options", "values_text"]

_SHOWN_ELEMENTS = 64  # tensors above this many elements are shown abridged


def devices_job() -> tuple[str, ...]:
    """The devices this machine offers: cpu, then cuda:0 ... cuda:N-1."""
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return ("cpu", *(f"cuda:{i}" for i in range(count)))


def analysis_job(program: str, options: Options) -> Analysis | Failure:
    """Evaluate `program`, trace its graph, run backward, read the grads.

    No layout here: the browser lays the graph out (the viewer's data is sent once);
    the SVG and PNG downloads are laid out when asked for (`pictures`).
    """
    start = time.perf_counter()
    try:
        traced = trace_program(program, trace_options(options))
        viewer = viewer_data(traced.graph, options, title="program")
    except ExprError as e:
        return _failure(e)
    except GraphvizAppError as e:
        return Failure(str(e), kind="trace")
    ev, graph = traced.evaluation, traced.graph
    outputs = ev.output if isinstance(ev.output, tuple) else (ev.output,)
    origin = origin_statement(graph, program)
    notes = [n for n in graph.notes if "first appears in backward" not in n] + list(traced.notes)
    notes += page_notes(graph)
    notes += depth_note(graph, options.module_depth)
    notes += _backward(outputs)
    leaves = {n: t for n, t in ev.variables.items() if t.is_leaf and t.requires_grad}
    checkable = _inputs(program)
    return Analysis(
        summary=str(graph.summary(saved_traced=options.show_saved)),
        viewer=viewer,
        graph_json=graph.to_json(),
        node_count=len(graph.nodes),
        outputs=tuple(
            _tensor_value("output" if len(outputs) == 1 else f"output[{i}]", t)
            for i, t in enumerate(outputs)
        ),
        grads=tuple(_grad_value(name, t) for name, t in _with_grads(leaves, ev.model)),
        # The check panel offers only what the checker takes as an input: a name
        # assigned once at the top level (one assigned in a loop is refused).
        leaves=tuple(n for n in leaves if n in checkable),
        notes=tuple(notes),
        seconds=time.perf_counter() - start,
        gradient_origin=origin,
        modules=module_rows(graph),
    )


def _with_grads(leaves: dict[str, torch.Tensor], model: torch.nn.Module | None) -> list[tuple[str, torch.Tensor]]:
    """The named leaves, then each module parameter that requires grad (`net.0.weight`), each tensor once."""
    found = list(leaves.items())
    if model is not None:
        shown = {id(t) for t in leaves.values()}  # identity only to list a tensor once, never as a name
        for name, p in model.named_parameters():
            if p.requires_grad and id(p) not in shown:
                shown.add(id(p))
                found.append((name, p))
    return found


def check_job(
    program: str, options: Options, wrt: str, expected: str, tolerances: Tolerances, modes: CheckModes | None = None
) -> GradientCheck | Failure:
    """Check the hand-derived gradient `expected` of the program's output by `wrt` (`checking.check_program`).

    For a non-scalar output, `expected` may be the gradient of the output's sum (the
    shape of `wrt`: what the page's .grad table shows) or the full Jacobian (output
    shape + shape of `wrt`); `GradientCheck.checked` says which was checked.
    """
    start = time.perf_counter()
    eps, atol, rtol = tolerances
    modes = modes or CheckModes()
    # float64 whatever the sidebar says: finite differences need the precision,
    # and a program holding float32 weights could not be cast by the checker.
    request = CheckRequest(wrt=(wrt,), expected=expected, device=options.device, dtype="float64", eps=eps, atol=atol,
                           rtol=rtol, modes=("rev", "fwd") if modes.forward else ("rev",), order=modes.order,
                           kinks=modes.kinks)
    try:
        outcome = check_program(program, request)
    except ExprError as e:
        return _failure(e)
    except GradcheckError as e:
        return Failure(str(e), kind="check")
    return GradientCheck(
        wrt=wrt, expected=expected, passed=outcome.passed, text=outcome.text, report=outcome.report,
        seconds=time.perf_counter() - start, checked=outcome.checked, warnings=outcome.warnings,
    )


def trace_options(options: Options) -> TraceOptions:
    """The sidebar's options as `trace_program` takes them (with gradients shown, each op's source is its line)."""
    return TraceOptions(device=options.device, dtype=options.dtype, show_saved=options.show_saved,
                        show_attrs=options.show_attrs, max_nodes=options.max_nodes,
                        gradients=options.show_gradients, gradients_or_note=True,
                        source_lines=options.show_gradients)


def _inputs(program: str) -> frozenset[str]:
    """The names the gradient checker accepts as inputs (see `to_function`)."""
    return parse(program).inputs


def _failure(e: Any) -> Failure:
    return Failure(e.message, kind=e.kind, line=e.line, col=e.col, excerpt=e.excerpt)


def _backward(outputs: tuple[torch.Tensor, ...]) -> list[str]:
    """Run backward from every output that has a graph; notes for the person."""
    roots = [t for t in outputs if t.requires_grad]
    if not roots:
        return []
    notes = []
    if any(t.numel() != 1 for t in roots):
        notes.append(
            "backward ran with a gradient of ones for the non-scalar output, "
            "as if you had written .sum() at the end"
        )
    try:
        torch.autograd.backward(roots, [torch.ones_like(t) for t in roots])
    except RuntimeError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        notes.append(f"backward failed, so no .grad is shown: {first}")
    return notes


def _tensor_value(name: str, t: torch.Tensor) -> TensorValue:
    return TensorValue(
        name=name, shape=_shape(t), dtype=str(t.dtype).removeprefix("torch."),
        device=str(t.device), text=values_text(t),
    )


def _grad_value(name: str, t: torch.Tensor) -> TensorValue:
    if t.grad is None:
        return TensorValue(
            name=f"{name}.grad", shape=_shape(t), dtype=str(t.dtype).removeprefix("torch."),
            device=str(t.device), text="None: the output does not depend on it",
        )
    return _tensor_value(f"{name}.grad", t.grad)


def _shape(t: torch.Tensor) -> str:
    return "(" + ", ".join(str(s) for s in t.shape) + ("," if t.dim() == 1 else "") + ")"


def values_text(t: torch.Tensor) -> str:
    """A tensor's values with 4 decimals, abridged past 64 elements.

    >>> import torch
    >>> values_text(torch.tensor([4/3, 2, 8/3]))
    '[1.3333, 2.0000, 2.6667]'
    """
    data = t.detach().to("cpu")
    if data.layout != torch.strided:  # a sparse gradient (nn.Embedding(sparse=True)): numpy reads dense only
        data = data.to_dense()
    if data.dtype in (torch.float16, torch.bfloat16):
        data = data.float()
    if data.is_complex() and data.dtype == torch.complex32:
        data = data.to(torch.complex64)
    return np.array2string(
        data.resolve_conj().resolve_neg().numpy(), precision=4, floatmode="fixed",
        separator=", ", suppress_small=True, threshold=_SHOWN_ELEMENTS, edgeitems=3, max_line_width=88,
    )
