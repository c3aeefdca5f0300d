"""Run an `nn.Module` forward under `record` and trace what it computed, in one call."""

from __future__ import annotations

import contextlib
import traceback
from typing import Any

import torch

from ..errors import TraceError
from ..model import Graph
from .big_stack import call_with_large_stack
from .recorder import record
from .thread_state import callers_autocast
from .tracer import trace

__all__ = ["trace_model", "given_tensors"]


def trace_model(
    model: torch.nn.Module,
    *inputs: Any,
    show_saved: bool = True,
    show_attrs: bool = True,
    max_nodes: int | None = None,
    gradients: bool = False,
    grad_outputs: Any = None,
    **forward_kwargs: Any,
) -> Graph:
    """The backward graph of `model(*inputs, **forward_kwargs)`, with modules and source lines.

    Runs the forward under `record(model)`, traces the output(s) with the
    model as `params` (leaves named by `named_parameters()`, `Graph.modules`
    filled), and frees them, all on a big-stack thread so that a model of
    more than 100,000 ops does not crash the process when its graph is freed.
    The forward runs with grad enabled even if the caller is under `no_grad`.
    Each distinct op's backward is run once on meta to find the temporaries it
    makes (`memory_timeline` counts them). The model's parameters and buffers and the tensors among the inputs existed
    before the step: their records are marked `TensorInfo.given`. Inside a process group
    (a torchrun rank) a DDP, FSDP2 or tensor-parallel model's graph carries its rank
    (`Graph.rank`: the forward's collectives, the FSDP units), which `save(graph, "rank0.html")` marks.

    Args:
        model: the `nn.Module` to call.
        inputs: positional arguments of the forward.
        show_saved, show_attrs, max_nodes, gradients, grad_outputs: as for
            `trace()` (`gradients=True` puts gradient statistics on the graph).
        forward_kwargs: every other keyword goes to the forward.

    Returns:
        A Graph holding no tensor; the model's outputs are dropped.

    Raises:
        TraceError: `model` is not an `nn.Module`, or the forward returned no tensor.
        NoGradFnError: no output depends on anything that requires grad.

    >>> import torch
    >>> g = trace_model(torch.nn.Linear(2, 1), torch.ones(1, 2))
    >>> sorted({n.module for n in g.nodes if n.module is not None}), [m.type for m in g.modules]
    ([''], ['Linear'])
    """
    if not isinstance(model, torch.nn.Module):
        raise TraceError(
            f"trace_model() expects an nn.Module first, got a {type(model).__name__}; "
            "call trace_model(model, *inputs), or trace(outputs) for a plain computation"
        )

    in_rank = _forward_in_rank(model)
    autocast = callers_autocast()  # torch keeps autocast per thread: the caller's holds for the forward

    def forward_and_trace() -> Graph:
        try:
            with record(model), autocast(), in_rank if in_rank is not None else contextlib.nullcontext():
                outputs = model(*inputs, **forward_kwargs)
            try:
                graph = trace(
                    outputs, model, show_saved=show_saved, show_attrs=show_attrs, max_nodes=max_nodes,
                    gradients=gradients, grad_outputs=grad_outputs,
                    given=given_tensors(model, inputs, forward_kwargs), op_temporaries=True,
                )
                return in_rank.on(graph) if in_rank is not None else graph
            finally:
                del outputs  # freed here, on the big stack, also when trace() raises
        except BaseException as e:
            # The traceback's frames hold what the forward built before it
            # raised; free that here too, not wherever the error is dropped.
            traceback.clear_frames(e.__traceback__)
            raise

    return call_with_large_stack(forward_and_trace)


def _forward_in_rank(model: torch.nn.Module) -> Any:  # noqa: ANN401 - a ForwardInRank, or None
    """Inside a process group, what records a distributed model's forward collectives (`Graph.rank`)."""
    if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return None  # the distributed tracing is not even imported
    from .distributed.rank_trace import forward_in_rank

    return forward_in_rank(model)


def given_tensors(model: torch.nn.Module, *inputs: Any) -> tuple[torch.Tensor, ...]:
    """The tensors a step of `model` starts from: its parameters, its buffers, the tensors in `inputs`.

    `inputs` may nest tuples, lists and dicts (other values are skipped).

    >>> import torch
    >>> len(given_tensors(torch.nn.BatchNorm1d(3), (torch.ones(2, 3),), {}))
    6
    """
    found: list[torch.Tensor] = [*model.parameters(), *model.buffers()]
    stack: list[Any] = list(inputs)
    while stack:
        value = stack.pop()
        if isinstance(value, torch.Tensor):
            found.append(value)
        elif isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, (tuple, list)):
            stack.extend(value)
    return tuple(found)
